package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// keyDetail is one API key as its edit page shows it.
type keyDetail struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Status        string          `json:"status"`
	Source        string          `json:"source"`
	Scopes        []string        `json:"scopes"`
	AllowedModels []string        `json:"allowed_models"`
	UsageLimits   json.RawMessage `json:"usage_limits"`
	Defaults      struct {
		ConfigID   string            `json:"config_id,omitempty"`
		VirtualKey string            `json:"virtual_key,omitempty"`
		Metadata   map[string]string `json:"metadata,omitempty"`
	} `json:"defaults"`
}

type keyEditData struct {
	Key     keyDetail
	Credit  string
	Reset   string
	CanEdit bool
}

// keyEditPage shows one key's settings in a form: description, status,
// allowed models, defaults and a spending limit.
func (h *Handler) keyEditPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	id := r.URL.Query().Get("id")
	if id == "" || len(id) > 64 {
		h.fail(w, r, c, http.StatusBadRequest, "which key?")
		return
	}
	d := &keyEditData{CanEdit: c.can("api_keys.update")}
	_, _, flash := h.sessions.take(c.id)
	p := &page{Title: "Key", Nav: "keys", Flash: flash, Data: d}
	if err := h.getJSON(r, c.s.key, "/api-keys/"+url.PathEscape(id), nil, &d.Key); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "keyedit", p)
		return
	}
	var lim struct {
		Credit *float64 `json:"credit_limit"`
		Reset  string   `json:"periodic_reset"`
	}
	if len(d.Key.UsageLimits) > 0 && json.Unmarshal(d.Key.UsageLimits, &lim) == nil && lim.Credit != nil {
		d.Credit = strconv.FormatFloat(*lim.Credit, 'f', -1, 64)
		d.Reset = lim.Reset
	}
	p.Title = "Key " + d.Key.Name
	if f := c.form; f != nil && f.Name == "edit-key" {
		// A refused save: the form shows what was typed.
		d.Key.Description, d.Key.Status = f.values.Get("description"), f.values.Get("status")
		d.Key.AllowedModels = splitList(f.values.Get("allowed_models"))
		d.Key.Defaults.VirtualKey, d.Key.Defaults.ConfigID = f.values.Get("default_virtual_key"), f.values.Get("default_config")
		d.Credit, d.Reset = f.values.Get("credit_limit"), f.values.Get("periodic_reset")
	}
	h.renderFor(w, r, c, http.StatusOK, "keyedit", p)
}

// keyUpdate sends the edit form as PUT /v1/api-keys/{id}: members the
// form does not show (scopes, rate limits, default metadata) keep their
// value.
func (h *Handler) keyUpdate(w http.ResponseWriter, r *http.Request, c *ctx) {
	id := r.PostFormValue("id")
	if id == "" || len(id) > 64 {
		h.fail(w, r, c, http.StatusBadRequest, "which key?")
		return
	}
	path := "/api-keys/" + url.PathEscape(id)
	var cur keyDetail
	back := "/keys/edit?id=" + url.QueryEscape(id)
	// A refusal shows the edit page again with what was typed.
	refuse := func(status int, msg string) { h.refill(w, r, c, status, msg, "edit-key", back, h.keyEditPage) }
	if err := h.getJSON(r, c.s.key, path, nil, &cur); err != nil {
		refuse(statusOf(err), "update: "+err.Error())
		return
	}
	models := splitList(r.PostFormValue("allowed_models"))
	defaults := map[string]any{"virtual_key": strings.TrimSpace(r.PostFormValue("default_virtual_key")),
		"config_id": strings.TrimSpace(r.PostFormValue("default_config"))}
	if len(cur.Defaults.Metadata) > 0 {
		defaults["metadata"] = cur.Defaults.Metadata
	}
	body := map[string]any{"description": r.PostFormValue("description"), "allowed_models": models, "defaults": defaults}
	if s := r.PostFormValue("status"); s == "active" || s == "disabled" {
		body["status"] = s
	}
	switch credit := strings.TrimSpace(r.PostFormValue("credit_limit")); credit {
	case "":
		body["usage_limits"] = nil
	default:
		v, err := strconv.ParseFloat(credit, 64)
		if err != nil || v < 0 {
			refuse(http.StatusBadRequest, "the spending limit is a number of dollars")
			return
		}
		reset := r.PostFormValue("periodic_reset")
		if reset != "weekly" && reset != "none" {
			reset = "monthly"
		}
		body["usage_limits"] = map[string]any{"credit_limit": v, "periodic_reset": reset}
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, http.MethodPut, path, nil, body); err != nil {
		refuse(statusOf(err), "update: "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, "key saved")
	h.redirect(w, r, back)
}

// splitList is a comma-separated field's items, trimmed, the empty ones
// dropped; never nil, so an empty field sends [] (none).
func splitList(s string) []string {
	out := []string{}
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}
