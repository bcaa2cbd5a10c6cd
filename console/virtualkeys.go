package console

import (
	"net/http"
	"net/url"
	"strings"
)

// vkRow is one virtual key of the virtual keys page. The provider key is
// never in it: the API shows only a masked form.
type vkRow struct {
	Slug     string `json:"slug"`
	Name     string `json:"name"`
	Provider string `json:"ai_provider_name"`
	Masked   string `json:"masked_api_key"`
	Status   string `json:"status"`
	Source   string `json:"source"`
}

type vkData struct {
	Keys           []vkRow
	Total          int
	Search         string
	CanNew, CanDel bool
}

// virtualKeysPage lists the virtual keys the signed-in key may see,
// those whose name or slug contains the search when one is given.
func (h *Handler) virtualKeysPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &vkData{CanNew: c.can("virtual_keys.create"), CanDel: c.can("virtual_keys.delete")}
	_, _, flash := h.sessions.take(c.id)
	p := &page{Title: "Virtual keys", Nav: "virtualkeys", Flash: flash, Data: d}
	var list struct {
		Total int     `json:"total"`
		Data  []vkRow `json:"data"`
	}
	var q url.Values
	if d.Search = filterValue(r, "search"); d.Search != "" {
		d.Search = d.Search[:min(len(d.Search), maxKeySearch)]
		q = url.Values{"search": {d.Search}}
	}
	if err := h.getJSON(r, c.s.key, "/virtual-keys", q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "virtualkeys", p)
		return
	}
	d.Keys, d.Total = list.Data, list.Total
	h.renderFor(w, r, c, http.StatusOK, "virtualkeys", p)
}

// virtualKeysAction creates or deletes a virtual key. The provider key
// typed in goes to the API (which seals it) and is kept nowhere here.
func (h *Handler) virtualKeysAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	var (
		method, path string
		body         any
	)
	switch action {
	case "create":
		m := map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")), "provider": strings.TrimSpace(r.PostFormValue("provider"))}
		if k := r.PostFormValue("key"); k != "" {
			m["key"] = k
		}
		if s := strings.TrimSpace(r.PostFormValue("slug")); s != "" {
			m["slug"] = s
		}
		method, path, body = http.MethodPost, "/virtual-keys", m
	case "delete":
		slug := r.PostFormValue("slug")
		if slug == "" || len(slug) > 256 {
			h.fail(w, r, c, http.StatusBadRequest, "which virtual key?")
			return
		}
		method, path = http.MethodDelete, "/virtual-keys/"+url.PathEscape(slug)
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, method, path, nil, body); err != nil {
		// The page again, the create form as typed but for the
		// provider key, which is typed again.
		h.refill(w, r, c, statusOf(err), action+": "+err.Error(), map[string]string{"create": "create-vk"}[action], "/virtual-keys", h.virtualKeysPage)
		return
	}
	h.sessions.setFlash(c.id, "virtual key "+map[string]string{"create": "created", "delete": "deleted"}[action])
	h.redirect(w, r, "/virtual-keys")
}
