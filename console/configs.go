package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxConfigJSON bounds a config typed into the editor (the form's own
// bound is larger; this is the one the message names).
const maxConfigJSON = 48 << 10

// configRow is one saved config of the configs page.
type configRow struct {
	Slug     string          `json:"slug"`
	Name     string          `json:"name"`
	Status   string          `json:"status"`
	Versions int             `json:"versions"`
	Source   string          `json:"source"`
	Config   json.RawMessage `json:"config"`
}

type configVersion struct {
	VersionID string          `json:"version_id"`
	Config    json.RawMessage `json:"config"`
	CreatedAt time.Time       `json:"created_at"`
}

// Pretty is the version's config indented for reading.
func (v configVersion) Pretty() string { return pretty(v.Config) }

type configsData struct {
	Configs []configRow
	Total   int
	// One config, when the page shows one.
	One      *configRow
	Editor   string
	Versions []configVersion
	CanNew   bool
	CanEdit  bool
}

func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// configsPage lists the saved configs, or with ?slug= shows one in an
// editor with its versions.
func (h *Handler) configsPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &configsData{CanNew: c.can("configs.create"), CanEdit: c.can("configs.update")}
	_, _, flash := h.sessions.take(c.id)
	p := &page{Title: "Configs", Flash: flash, Data: d}
	slug := r.URL.Query().Get("slug")
	if slug != "" {
		if len(slug) > 256 {
			h.fail(w, r, c, http.StatusBadRequest, "which config?")
			return
		}
		path := "/configs/" + url.PathEscape(slug)
		var one configRow
		var vs struct {
			Data []configVersion `json:"data"`
		}
		err := h.getJSON(r, c.s.key, path, nil, &one)
		if err == nil {
			err = h.getJSON(r, c.s.key, path+"/versions", nil, &vs)
		}
		if err != nil {
			p.Err = err.Error()
			h.renderFor(w, r, c, statusOf(err), "configs", p)
			return
		}
		d.One, d.Editor, d.Versions = &one, pretty(one.Config), vs.Data
		p.Title = "Config " + one.Slug
		h.renderFor(w, r, c, http.StatusOK, "configs", p)
		return
	}
	var list struct {
		Total int         `json:"total"`
		Data  []configRow `json:"data"`
	}
	if err := h.getJSON(r, c.s.key, "/configs", nil, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "configs", p)
		return
	}
	d.Configs, d.Total = list.Data, list.Total
	h.renderFor(w, r, c, http.StatusOK, "configs", p)
}

// configsAction creates a config or saves a new version of one. The
// console checks only that the text is JSON; the API checks the config
// as it checks every other (schema, targets, virtual keys) and its 400
// names the rule.
func (h *Handler) configsAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	text := strings.TrimSpace(r.PostFormValue("config"))
	if len(text) > maxConfigJSON || !json.Valid([]byte(text)) {
		h.fail(w, r, c, http.StatusBadRequest, "the config must be JSON of at most 48 KiB")
		return
	}
	cfg := json.RawMessage(text)
	var method, path, back string
	var body any
	switch action {
	case "create":
		method, path = http.MethodPost, "/configs"
		body = map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")), "config": cfg}
		back = "/configs"
	case "save":
		slug := r.PostFormValue("slug")
		if slug == "" || len(slug) > 256 {
			h.fail(w, r, c, http.StatusBadRequest, "which config?")
			return
		}
		method, path = http.MethodPut, "/configs/"+url.PathEscape(slug)
		body = map[string]any{"config": cfg}
		back = "/configs?slug=" + url.QueryEscape(slug)
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, method, path, nil, body); err != nil {
		h.fail(w, r, c, statusOf(err), action+": "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, "config saved")
	h.redirect(w, r, back)
}
