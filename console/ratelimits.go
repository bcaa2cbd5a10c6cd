package console

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// rateRow is one rate-limit policy of the budgets page.
type rateRow struct {
	ID         string          `json:"id"`
	Name       *string         `json:"name"`
	Type       string          `json:"type"`
	Unit       string          `json:"unit"`
	Value      float64         `json:"value"`
	Status     string          `json:"status"`
	Conditions json.RawMessage `json:"conditions"`
	GroupBy    json.RawMessage `json:"group_by"`
	// Usage is the signed-in key's group's count, for a policy grouped
	// only by the key's identity; nil when it is grouped by request
	// attributes (PerGroup names them) or the count could not be read.
	Usage *rateUsage
	// PerGroup are the group_by keys the key's identity does not fill
	// (model, metadata.team...): the page offers a look-up of one group,
	// whose answer is Looked (or LookErr).
	PerGroup []string
	// Inputs are the look-up form's fields: every group_by key but the
	// workspace and organisation, which are always the key's own.
	Inputs  []groupInput
	Looked  *rateUsage
	LookErr string
}

// groupInput is one field of a group look-up, with the value last asked.
type groupInput struct{ Key, Value string }

// rateUsage is where one group stands on a policy, as
// GET /v1/policies/rate-limits/{id}/usage answers.
type rateUsage struct {
	PolicyID   string            `json:"policy_id"`
	Group      map[string]string `json:"group"`
	Value      float64           `json:"value"`
	Used       float64           `json:"used"`
	Remaining  float64           `json:"remaining"`
	ResetAfter float64           `json:"reset_after"`
	RetryAfter float64           `json:"retry_after"`
}

// Frees says when the window gives units back: all of them after
// ResetAfter, the next one after RetryAfter when nothing remains.
func (u *rateUsage) Frees() string {
	switch {
	case u.ResetAfter <= 0:
		return "nothing counted"
	case u.Remaining <= 0 && u.RetryAfter > 0:
		return "next in " + duration(u.RetryAfter) + ", all free in " + duration(u.ResetAfter)
	}
	return "all free in " + duration(u.ResetAfter)
}

// GroupText is the group as "key=value, ..." by key, an absent value
// shown as (none).
func (u *rateUsage) GroupText() string {
	parts := make([]string, 0, len(u.Group))
	for k, v := range u.Group {
		if v == "" {
			v = "(none)"
		}
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// duration writes seconds as the page shows them: whole seconds, minutes
// and seconds, or hours and minutes.
func duration(s float64) string {
	return time.Duration(math.Ceil(s) * float64(time.Second)).String()
}

// identityKeys are the group_by keys the signed-in key's identity fills,
// so the API's own-usage route can answer for them.
var identityKeys = map[string]bool{"api_key": true, "workspace_id": true, "organisation_id": true}

// rateLimits reads the workspace's active rate-limit policies (the API's
// largest page: a workspace has a handful, not thousands) and the signed-in
// key's usage on those its identity groups (one call for all of them).
// With ?rl=<id>&<group_by key>=<value>... it also reads that group's usage
// on that policy. A failure of the list is the section's, not the page's;
// one of a usage read only leaves that usage unknown.
func (h *Handler) rateLimits(r *http.Request, c *ctx) ([]rateRow, string) {
	var list struct {
		Data []rateRow `json:"data"`
	}
	q := url.Values{"status": {"active"}, "limit": {"100"}}
	if err := h.getJSON(r, c.s.key, "/policies/rate-limits", q, &list); err != nil {
		return nil, err.Error()
	}
	lookID := r.URL.Query().Get("rl")
	mine := false
	for i := range list.Data {
		row := &list.Data[i]
		var groupBy []struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(row.GroupBy, &groupBy)
		for _, g := range groupBy {
			if !identityKeys[g.Key] {
				row.PerGroup = append(row.PerGroup, g.Key)
			}
			if g.Key != "workspace_id" && g.Key != "organisation_id" {
				in := groupInput{Key: g.Key}
				if row.ID == lookID {
					in.Value = r.URL.Query().Get(g.Key)
				}
				row.Inputs = append(row.Inputs, in)
			}
		}
		mine = mine || len(row.PerGroup) == 0
		if row.ID == lookID {
			row.Looked, row.LookErr = h.lookUpGroup(r, c, row)
		}
	}
	if mine {
		var own struct {
			Data []*rateUsage `json:"data"`
		}
		if err := h.getJSON(r, c.s.key, "/policies/rate-limits/usage", nil, &own); err == nil {
			for _, u := range own.Data {
				for i := range list.Data {
					if list.Data[i].ID == u.PolicyID {
						list.Data[i].Usage = u
					}
				}
			}
		}
	}
	return list.Data, ""
}

// lookUpGroup reads one group's usage on row's policy, from the page's
// query: only the policy's group_by keys are passed on (the API bounds
// them, and answers 400 for anything else).
func (h *Handler) lookUpGroup(r *http.Request, c *ctx, row *rateRow) (*rateUsage, string) {
	q := url.Values{}
	for _, in := range row.Inputs {
		if in.Value != "" {
			q.Set(in.Key, in.Value)
		}
	}
	u := new(rateUsage)
	if err := h.getJSON(r, c.s.key, "/policies/rate-limits/"+url.PathEscape(row.ID)+"/usage", q, u); err != nil {
		return nil, err.Error()
	}
	return u, ""
}

// rateLimitsAction creates a rate-limit policy, sets one's value or
// archives one. The API applies a new value to the next request.
func (h *Handler) rateLimitsAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	id := r.PostFormValue("id")
	if action != "create" && (id == "" || len(id) > 64) {
		h.fail(w, r, c, http.StatusBadRequest, "which rate limit?")
		return
	}
	value, valueErr := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue("value")), 64)
	// A refusal shows the budgets page again, the create form as typed.
	refuse := func(status int, msg string) {
		h.refill(w, r, c, status, msg, map[string]string{"create": "create-rate"}[action], "/budgets", h.budgetsPage)
	}
	var method, path string
	var body any
	switch action {
	case "create":
		key := strings.TrimSpace(r.PostFormValue("api_key"))
		if key == "" {
			key = "*"
		}
		if valueErr != nil {
			refuse(http.StatusBadRequest, "the limit must be a number")
			return
		}
		m := map[string]any{"type": r.PostFormValue("type"), "unit": r.PostFormValue("unit"), "value": value,
			"conditions": []map[string]string{{"key": "api_key", "value": key}}, "group_by": []map[string]string{{"key": "api_key"}}}
		if n := strings.TrimSpace(r.PostFormValue("name")); n != "" {
			m["name"] = n
		}
		method, path, body = http.MethodPost, "/policies/rate-limits", m
	case "update":
		if valueErr != nil {
			refuse(http.StatusBadRequest, "the limit must be a number")
			return
		}
		// A PUT keeps the fields it does not name.
		method, path, body = http.MethodPut, "/policies/rate-limits/"+url.PathEscape(id), map[string]any{"value": value}
	case "archive":
		method, path = http.MethodDelete, "/policies/rate-limits/"+url.PathEscape(id)
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, method, path, nil, body); err != nil {
		refuse(statusOf(err), "rate limit "+action+": "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, "rate limit "+map[string]string{"create": "created", "update": "updated", "archive": "archived"}[action])
	h.redirect(w, r, "/budgets")
}
