package console

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// budgetRow is one usage limit of the budgets page, with where the
// signed-in key's group stands on it.
type budgetRow struct {
	ID            string          `json:"id"`
	Name          *string         `json:"name"`
	Type          string          `json:"type"`
	CreditLimit   float64         `json:"credit_limit"`
	PeriodicReset string          `json:"periodic_reset"`
	Status        string          `json:"status"`
	Conditions    json.RawMessage `json:"conditions"`
	GroupBy       json.RawMessage `json:"group_by"`
	// Used and Remaining are the signed-in key's group's, from
	// /v1/usage/me; Mine says whether the limit applies to the key.
	Used, Remaining float64
	Mine            bool
}

type budgetsData struct {
	Budgets []budgetRow
	Total   int
	// The forms shown: the usage-limit scopes the API checks, and the
	// rate-limit ones the console asks for.
	CanNew, CanSet, CanDel          bool
	Rates                           []rateRow
	RatesErr                        string
	CanRateNew, CanRateSet, CanArch bool
	// Spend is every group's spend, for a key that may read budgets;
	// nil for one that may not.
	Spend *spendData
}

// budgetsPage lists the workspace's usage limits with the signed-in key's
// spend against each one that applies to it, and its rate-limit policies
// with the key's usage of each: three API calls, a fourth when a policy
// is grouped by the key alone (its usage, all such policies at once), a
// fifth for a group looked up (see rateLimits). A key that may read
// budgets also sees every group's spend (one more call, see spend).
func (h *Handler) budgetsPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &budgetsData{CanNew: c.can("usage_limits.create"), CanSet: c.can("usage_limits.update"), CanDel: c.can("usage_limits.delete"),
		CanRateNew: c.can("rate_limits.create"), CanRateSet: c.can("rate_limits.update"), CanArch: c.can("rate_limits.delete")}
	_, _, flash := h.sessions.take(c.id)
	p := &page{Title: "Budgets", Flash: flash, Data: d}
	var list struct {
		Total int         `json:"total"`
		Data  []budgetRow `json:"data"`
	}
	if err := h.getJSON(r, c.s.key, "/policies/usage-limits", nil, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "budgets", p)
		return
	}
	var me struct {
		Limits []struct {
			PolicyID  string  `json:"policy_id"`
			Used      float64 `json:"used"`
			Remaining float64 `json:"remaining"`
		} `json:"usage_limits"`
	}
	// The usage view is the key's own; a failure leaves spend unknown
	// rather than failing the page.
	_ = h.getJSON(r, c.s.key, "/usage/me", nil, &me)
	for i := range list.Data {
		for _, s := range me.Limits {
			if s.PolicyID == list.Data[i].ID {
				list.Data[i].Used, list.Data[i].Remaining, list.Data[i].Mine = s.Used, s.Remaining, true
			}
		}
	}
	d.Budgets, d.Total = list.Data, list.Total
	d.Spend = h.spend(r, c)
	d.Rates, d.RatesErr = h.rateLimits(r, c)
	h.renderFor(w, r, c, http.StatusOK, "budgets", p)
}

// budgetFields are the members a usage limit's PUT takes back from its
// GET (the others are the record's own: id, scope, times).
var budgetFields = []string{"name", "type", "credit_limit", "alert_threshold", "periodic_reset", "timezone", "conditions", "group_by", "status"}

// budgetsAction runs a budgets-page form: create, set a limit, delete.
func (h *Handler) budgetsAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	id := r.PostFormValue("id")
	if action != "create" && (id == "" || len(id) > 64) {
		h.fail(w, r, c, http.StatusBadRequest, "which budget?")
		return
	}
	limit, limitErr := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue("credit_limit")), 64)
	// A refusal shows the budgets page again, the create form as typed.
	refuse := func(status int, msg string) {
		h.refill(w, r, c, status, msg, map[string]string{"create": "create-budget"}[action], "/budgets", h.budgetsPage)
	}
	var method, path string
	var body any
	switch action {
	case "create":
		if limitErr != nil {
			refuse(http.StatusBadRequest, "the limit must be a number")
			return
		}
		key := strings.TrimSpace(r.PostFormValue("api_key"))
		if key == "" {
			key = "*"
		}
		method, path = http.MethodPost, "/policies/usage-limits"
		body = map[string]any{"name": r.PostFormValue("name"), "type": r.PostFormValue("type"), "credit_limit": limit,
			"periodic_reset": r.PostFormValue("periodic_reset"), "conditions": []map[string]string{{"key": "api_key", "value": key}},
			"group_by": []map[string]string{{"key": "api_key"}}}
	case "update":
		if limitErr != nil {
			refuse(http.StatusBadRequest, "the limit must be a number")
			return
		}
		// A PUT replaces the settings: start from the limit as it is.
		path = "/policies/usage-limits/" + url.PathEscape(id)
		var cur map[string]json.RawMessage
		if err := h.getJSON(r, c.s.key, path, nil, &cur); err != nil {
			refuse(statusOf(err), "update: "+err.Error())
			return
		}
		m := make(map[string]any, len(budgetFields))
		for _, f := range budgetFields {
			if v, ok := cur[f]; ok {
				m[f] = v
			}
		}
		m["credit_limit"] = limit
		method, body = http.MethodPut, m
	case "delete":
		method, path = http.MethodDelete, "/policies/usage-limits/"+url.PathEscape(id)
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, method, path, nil, body); err != nil {
		refuse(statusOf(err), action+": "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, "budget "+map[string]string{"create": "created", "update": "updated", "delete": "deleted"}[action])
	h.redirect(w, r, "/budgets")
}

// nearShare is the share of a limit spent from which the budgets view
// flags a group as near its limit.
const nearShare = 0.8

// Share is how much of its limit the group has spent, 0 to 1 and past
// 1 when the last requests cost more than they reserved; a limit of 0
// counts as spent.
func (s *spendRow) Share() float64 {
	if s.CreditLimit <= 0 {
		return 1
	}
	return s.Used / s.CreditLimit
}

// Percent is Share as the page writes it ("82%").
func (s *spendRow) Percent() string {
	return strconv.FormatFloat(math.Floor(s.Share()*100), 'f', 0, 64) + "%"
}

// Level flags the group: "over" (nothing left), "near" (at least 80 %
// spent) or "".
func (s *spendRow) Level() string {
	switch {
	case s.Status == "exhausted" || s.Remaining <= 0 || s.Share() >= 1:
		return "over"
	case s.Share() >= nearShare:
		return "near"
	}
	return ""
}

// Flagged counts the groups shown that are over and near their limits.
func (d *spendData) Flagged() (over, near int) {
	for i := range d.Rows {
		switch d.Rows[i].Level() {
		case "over":
			over++
		case "near":
			near++
		}
	}
	return over, near
}

// Over is the number of groups shown with nothing left.
func (d *spendData) Over() int { o, _ := d.Flagged(); return o }

// Near is the number of groups shown at 80 % of their limit or more.
func (d *spendData) Near() int { _, n := d.Flagged(); return n }
