package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
}

// rateLimits reads the workspace's active rate-limit policies (the API's
// largest page: a workspace has a handful, not thousands). A failure is
// the section's, not the page's.
func (h *Handler) rateLimits(r *http.Request, c *ctx) ([]rateRow, string) {
	var list struct {
		Data []rateRow `json:"data"`
	}
	q := url.Values{"status": {"active"}, "limit": {"100"}}
	if err := h.getJSON(r, c.s.key, "/policies/rate-limits", q, &list); err != nil {
		return nil, err.Error()
	}
	return list.Data, ""
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
	var method, path string
	var body any
	switch action {
	case "create":
		key := strings.TrimSpace(r.PostFormValue("api_key"))
		if key == "" {
			key = "*"
		}
		if valueErr != nil {
			h.fail(w, r, c, http.StatusBadRequest, "the limit must be a number")
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
			h.fail(w, r, c, http.StatusBadRequest, "the limit must be a number")
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
		h.fail(w, r, c, statusOf(err), "rate limit "+action+": "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, "rate limit "+map[string]string{"create": "created", "update": "updated", "archive": "archived"}[action])
	h.redirect(w, r, "/budgets")
}
