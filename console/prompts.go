package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// promptsPageSize is how many prompts the prompts page lists.
const promptsPageSize = 50

// newPromptTemplate is the create form's template until one is typed: the
// shape the API takes, with a variable.
const newPromptTemplate = `[
  {"role": "system", "content": "You are a helpful assistant."},
  {"role": "user", "content": "Hello {{name}}"}
]`

// Scopes of the prompts API (promptapi's) that decide which of the
// page's write forms show; the API checks them again.
const (
	scopePromptCreate  = "prompts.create"
	scopePromptUpdate  = "prompts.update"
	scopePromptPublish = "prompts.publish"
)

type promptRow struct {
	ID     string `json:"id"`
	Slug   string `json:"slug"`
	Name   string `json:"name"`
	Model  string `json:"model"`
	Status string `json:"status"`
	// Source is "api", or "file" for a prompt file's (read-only).
	Source           string `json:"source"`
	PublishedVersion *int   `json:"published_version"`
	LatestVersion    int    `json:"latest_version"`
}

type promptVersionRow struct {
	Number      int       `json:"prompt_version"`
	Template    string    `json:"prompt_template"`
	Description string    `json:"prompt_description"`
	Model       string    `json:"model"`
	Published   bool      `json:"published"`
	CreatedAt   time.Time `json:"created_at"`
}

// PrettyTemplate is the version's messages indented for reading.
func (v promptVersionRow) PrettyTemplate() string { return pretty(json.RawMessage(v.Template)) }

type promptsData struct {
	Prompts []promptRow
	Total   int
	Search  string
	Page    int
	Prev    string
	Next    string
	// One prompt, when the page shows one.
	One       *promptRow
	Versions  []promptVersionRow
	Variables string
	Rendered  string
	// The editor's fields: a new version starts from the latest one.
	Template, Model, Description string
	// The write forms shown (the API checks the scopes again).
	CanNew, CanEdit, CanPublish bool
}

// promptsPage lists prompts (searchable, paged), or with ?id= shows one
// prompt's versions, an editor for a new version and a render preview
// form.
func (h *Handler) promptsPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &promptsData{Variables: "{}", CanNew: c.can(scopePromptCreate), CanEdit: c.can(scopePromptUpdate), CanPublish: c.can(scopePromptPublish)}
	var flash string
	if r.Method != http.MethodPost {
		_, _, flash = h.sessions.take(c.id)
	}
	p := &page{Title: "Prompts", Flash: flash, Data: d}
	d.Template = newPromptTemplate
	if id := r.URL.Query().Get("id"); id != "" {
		h.promptPage(w, r, c, p, d, id)
		return
	}
	d.Search = filterValue(r, "search")
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = min(max(d.Page, 0), 1<<20)
	q := url.Values{"page_size": {strconv.Itoa(promptsPageSize)}, "current_page": {strconv.Itoa(d.Page)}}
	if d.Search != "" {
		q.Set("search", d.Search)
	}
	var list struct {
		Total int         `json:"total"`
		Data  []promptRow `json:"data"`
	}
	if err := h.getJSON(r, c.s.key, "/prompts", q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "prompts", p)
		return
	}
	d.Prompts, d.Total = list.Data, list.Total
	link := func(pg int) string {
		v := url.Values{"page": {strconv.Itoa(pg)}}
		if d.Search != "" {
			v.Set("search", d.Search)
		}
		return "?" + v.Encode()
	}
	if d.Page > 0 {
		d.Prev = link(d.Page - 1)
	}
	if (d.Page+1)*promptsPageSize < d.Total {
		d.Next = link(d.Page + 1)
	}
	h.renderFor(w, r, c, http.StatusOK, "prompts", p)
}

// promptPage shows one prompt's versions; a POST renders it with the
// variables given (POST /v1/prompts/{id}/render: no provider call).
func (h *Handler) promptPage(w http.ResponseWriter, r *http.Request, c *ctx, p *page, d *promptsData, id string) {
	if len(id) > 256 {
		h.fail(w, r, c, http.StatusBadRequest, "which prompt?")
		return
	}
	path := "/prompts/" + url.PathEscape(id)
	var one promptRow
	var vs struct {
		Data []promptVersionRow `json:"data"`
	}
	err := h.getJSON(r, c.s.key, path, nil, &one)
	if err == nil {
		err = h.getJSON(r, c.s.key, path+"/versions", nil, &vs)
	}
	if err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "prompts", p)
		return
	}
	d.One, d.Versions = &one, vs.Data
	d.CanEdit = d.CanEdit && one.Source != "file"
	d.CanPublish = d.CanPublish && one.Source != "file"
	if n := len(vs.Data); n > 0 {
		latest := vs.Data[n-1]
		d.Template, d.Model = latest.PrettyTemplate(), latest.Model
	}
	if f := c.form; f != nil && f.Name == "edit-prompt" {
		d.Template, d.Model, d.Description = f.values.Get("template"), f.values.Get("model"), f.values.Get("description")
	}
	p.Title = "Prompt " + one.Slug
	if r.Method == http.MethodPost {
		d.Variables = strings.TrimSpace(r.PostFormValue("variables"))
		var vars map[string]any
		if err := json.Unmarshal([]byte(d.Variables), &vars); err != nil || len(d.Variables) > maxConfigJSON {
			p.Err = "variables must be a JSON object"
			h.renderFor(w, r, c, http.StatusBadRequest, "prompts", p)
			return
		}
		target := path
		if v := r.PostFormValue("version"); v != "" {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				target += "@" + strconv.Itoa(n)
			}
		}
		_, _, raw, err := h.call(r.Context(), r, c.s.key, http.MethodPost, target+"/render", nil, map[string]any{"variables": vars})
		if err != nil {
			p.Err = err.Error()
			h.renderFor(w, r, c, statusOf(err), "prompts", p)
			return
		}
		var out struct {
			Data json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal(raw, &out)
		d.Rendered = pretty(out.Data)
	}
	h.renderFor(w, r, c, http.StatusOK, "prompts", p)
}

// promptsAction runs a prompts-page form through the prompts API:
// create (POST /v1/prompts, whose first version is published), update
// (PUT /v1/prompts/{id}: a new, unpublished version from the latest with
// the template, model and description typed) and publish
// (PUT /v1/prompts/{id}/makeDefault: the version every caller then
// gets). The console checks only that the template is JSON; the API
// checks the messages and its 400 names the rule. A refusal shows the
// form again as it was typed.
func (h *Handler) promptsAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	id := r.PostFormValue("id")
	back := "/prompts"
	if action != "create" {
		if id == "" || len(id) > 256 {
			h.fail(w, r, c, http.StatusBadRequest, "which prompt?")
			return
		}
		back = "/prompts?id=" + url.QueryEscape(id)
	}
	form := map[string]string{"create": "create-prompt", "update": "edit-prompt"}[action]
	refuse := func(status int, msg string) { h.refill(w, r, c, status, msg, form, back, h.promptsPage) }
	var body map[string]any
	if action == "create" || action == "update" {
		text := strings.TrimSpace(r.PostFormValue("template"))
		if len(text) > maxConfigJSON || !json.Valid([]byte(text)) {
			refuse(http.StatusBadRequest, "the template must be a JSON array of chat messages of at most 48 KiB")
			return
		}
		// The API takes the messages as a string (the SDK's "string").
		body = map[string]any{"string": text, "version_description": strings.TrimSpace(r.PostFormValue("description"))}
		if m := strings.TrimSpace(r.PostFormValue("model")); m != "" {
			body["model"] = m
		}
	}
	var method, path, flash string
	switch action {
	case "create":
		body["name"] = strings.TrimSpace(r.PostFormValue("name"))
		method, path, flash = http.MethodPost, "/prompts", "prompt created (version 1, published)"
	case "update":
		method, path, flash = http.MethodPut, "/prompts/"+url.PathEscape(id), "new version saved (not published)"
	case "publish":
		n, err := strconv.Atoi(r.PostFormValue("version"))
		if err != nil || n < 1 {
			refuse(http.StatusBadRequest, "which version?")
			return
		}
		method, path = http.MethodPut, "/prompts/"+url.PathEscape(id)+"/makeDefault"
		body, flash = map[string]any{"version": n}, "version "+strconv.Itoa(n)+" published"
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	_, _, raw, err := h.call(r.Context(), r, c.s.key, method, path, nil, body)
	if err != nil {
		refuse(statusOf(err), action+": "+err.Error())
		return
	}
	if action == "create" {
		var out struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &out) == nil && out.ID != "" {
			back = "/prompts?id=" + url.QueryEscape(out.ID)
		}
	}
	h.sessions.setFlash(c.id, flash)
	h.redirect(w, r, back)
}
