package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
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
	// From and To are the versions compared (their ids), Diff their
	// line diff; Same says they are equal.
	From, To string
	Diff     []diffLine
	Same     bool
}

// Number is a version's place, from 1 for the oldest, as the page names
// it (the API answers them oldest first).
func (d *configsData) Number(id string) int {
	for i, v := range d.Versions {
		if v.VersionID == id {
			return i + 1
		}
	}
	return 0
}

func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// configsPage lists the saved configs, or with ?slug= shows one in an
// editor with its versions and, with ?from=&to= (version ids; by default
// the two latest), the line diff between two of them.
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
		one, vs, err := h.configVersions(r, c, slug)
		if err != nil {
			p.Err = err.Error()
			h.renderFor(w, r, c, statusOf(err), "configs", p)
			return
		}
		d.One, d.Editor, d.Versions = one, pretty(one.Config), vs
		if f := c.form; f != nil && f.Name == "edit-config" {
			d.Editor = f.values.Get("config")
		}
		d.compare(r.URL.Query().Get("from"), r.URL.Query().Get("to"))
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

// configVersions reads one config and its versions (a Caddyfile config
// has none the API lists: its versions are then empty).
func (h *Handler) configVersions(r *http.Request, c *ctx, slug string) (*configRow, []configVersion, error) {
	path := "/configs/" + url.PathEscape(slug)
	var one configRow
	if err := h.getJSON(r, c.s.key, path, nil, &one); err != nil {
		return nil, nil, err
	}
	var vs struct {
		Data []configVersion `json:"data"`
	}
	if one.Source != "config" {
		if err := h.getJSON(r, c.s.key, path+"/versions", nil, &vs); err != nil {
			return nil, nil, err
		}
	}
	return &one, vs.Data, nil
}

// compare sets the diff between versions from and to (ids), by default
// the one before the latest and the latest; nothing with fewer than two.
func (d *configsData) compare(from, to string) {
	n := len(d.Versions)
	if n < 2 {
		return
	}
	find := func(id string, def int) configVersion {
		for _, v := range d.Versions {
			if v.VersionID == id {
				return v
			}
		}
		return d.Versions[def]
	}
	a, b := find(from, n-2), find(to, n-1)
	d.From, d.To = a.VersionID, b.VersionID
	d.Diff = lineDiff(a.Pretty(), b.Pretty())
	d.Same = a.Pretty() == b.Pretty()
}

// configsAction creates a config, saves a new version of one, or rolls
// one back. The console checks only that the text is JSON; the API
// checks the config as it checks every other (schema, targets, virtual
// keys) and its 400 names the rule. A refusal shows the form again as it
// was typed.
func (h *Handler) configsAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	slug := r.PostFormValue("slug")
	back := "/configs"
	if action != "create" {
		if slug == "" || len(slug) > 256 {
			h.fail(w, r, c, http.StatusBadRequest, "which config?")
			return
		}
		back = "/configs?slug=" + url.QueryEscape(slug)
	}
	form := map[string]string{"create": "create-config", "save": "edit-config"}[action]
	refuse := func(status int, msg string) { h.refill(w, r, c, status, msg, form, back, h.configsPage) }
	var cfg json.RawMessage
	if action == "create" || action == "save" {
		text := strings.TrimSpace(r.PostFormValue("config"))
		if len(text) > maxConfigJSON || !json.Valid([]byte(text)) {
			refuse(http.StatusBadRequest, "the config must be JSON of at most 48 KiB")
			return
		}
		cfg = json.RawMessage(text)
	}
	var method, path string
	var body any
	flash := "config saved"
	switch action {
	case "create":
		method, path = http.MethodPost, "/configs"
		body = map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")), "config": cfg}
	case "save":
		method, path = http.MethodPut, "/configs/"+url.PathEscape(slug)
		body = map[string]any{"config": cfg}
	case "rollback":
		// A rollback never rewrites history: it saves the old version's
		// config as a new version, through the same PUT a save makes.
		_, vs, err := h.configVersions(r, c, slug)
		if err != nil {
			refuse(statusOf(err), "rollback: "+err.Error())
			return
		}
		want := r.PostFormValue("version")
		for i, v := range vs {
			if v.VersionID == want && want != "" {
				cfg, flash = v.Config, "rolled back: version "+strconv.Itoa(len(vs)+1)+" is version "+strconv.Itoa(i+1)+"'s config"
			}
		}
		if cfg == nil {
			refuse(http.StatusNotFound, "rollback: no such version of "+slug)
			return
		}
		method, path = http.MethodPut, "/configs/"+url.PathEscape(slug)
		body = map[string]any{"config": cfg}
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, method, path, nil, body); err != nil {
		refuse(statusOf(err), action+": "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, flash)
	h.redirect(w, r, back)
}
