package console

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// batchRow is one batch of the batches page.
type batchRow struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Endpoint  string `json:"endpoint"`
	CreatedAt int64  `json:"created_at"`
	Counts    struct {
		Total     int64 `json:"total"`
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"request_counts"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
}

// Created is the batch's creation time for the page.
func (b batchRow) Created() string { return time.Unix(b.CreatedAt, 0).UTC().Format(time.RFC3339) }

// Cancellable reports whether a cancel applies to the batch's state.
func (b batchRow) Cancellable() bool {
	return b.Status == "validating" || b.Status == "in_progress"
}

type batchesData struct {
	Batches []batchRow
	After   string
	Next    string
}

// batchesPageSize is the API's largest batch page.
const batchesPageSize = 100

// idPattern bounds the batch and file ids the console puts in an API path.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// batchesPage lists the workspace's batches, newest first, by cursor.
func (h *Handler) batchesPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &batchesData{}
	_, _, flash := h.sessions.take(c.id)
	p := &page{Title: "Batches", Flash: flash, Data: d}
	q := url.Values{"limit": {strconv.Itoa(batchesPageSize)}}
	if a := r.URL.Query().Get("after"); idPattern.MatchString(a) {
		q.Set("after", a)
		d.After = a
	}
	var list struct {
		Data    []batchRow `json:"data"`
		HasMore bool       `json:"has_more"`
		LastID  string     `json:"last_id"`
	}
	if err := h.getJSON(r, c.s.key, "/batches", q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "batches", p)
		return
	}
	d.Batches = list.Data
	if list.HasMore {
		d.Next = list.LastID
	}
	h.renderFor(w, r, c, http.StatusOK, "batches", p)
}

// batchesAction cancels a batch.
func (h *Handler) batchesAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	id := r.PostFormValue("id")
	if action != "cancel" {
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if !idPattern.MatchString(id) {
		h.fail(w, r, c, http.StatusBadRequest, "which batch?")
		return
	}
	if _, _, _, err := h.call(r.Context(), r, c.s.key, http.MethodPost, "/batches/"+id+"/cancel", nil, nil); err != nil {
		h.fail(w, r, c, statusOf(err), "cancel: "+err.Error())
		return
	}
	h.sessions.setFlash(c.id, "cancelling "+id)
	h.redirect(w, r, "/batches")
}

// fileContent streams a stored file (a batch's output or errors) from
// GET /v1/files/{id}/content as a download, without holding it in
// memory.
func (h *Handler) fileContent(w http.ResponseWriter, r *http.Request, c *ctx, id string) {
	if !idPattern.MatchString(id) {
		h.fail(w, r, c, http.StatusBadRequest, "which file?")
		return
	}
	base, err := h.apiBase(r)
	if err != nil {
		h.fail(w, r, c, http.StatusBadGateway, err.Error())
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, base+"/files/"+id+"/content", nil)
	if err != nil {
		h.fail(w, r, c, http.StatusBadRequest, "which file?")
		return
	}
	if h.API == "" {
		req.Host = r.Host
	}
	req.Header.Set("x-gateway-api-key", c.s.key)
	resp, err := h.client.Do(req)
	if err != nil {
		h.fail(w, r, c, http.StatusBadGateway, "calling the gateway API failed")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		h.fail(w, r, c, resp.StatusCode, decodeError(resp.StatusCode, raw).Error())
		return
	}
	// Served as an attachment of a type no browser runs, whatever the
	// file holds.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+id+`.jsonl"`)
	if n := resp.Header.Get("Content-Length"); n != "" {
		w.Header().Set("Content-Length", n)
	}
	_, _ = io.Copy(w, resp.Body)
}
