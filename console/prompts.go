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

type promptRow struct {
	ID     string `json:"id"`
	Slug   string `json:"slug"`
	Name   string `json:"name"`
	Model  string `json:"model"`
	Status string `json:"status"`
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
}

// promptsPage lists prompts (searchable, paged), or with ?id= shows one
// prompt's versions and a render preview form.
func (h *Handler) promptsPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &promptsData{Variables: "{}"}
	p := &page{Title: "Prompts", Data: d}
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
