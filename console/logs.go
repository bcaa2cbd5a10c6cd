package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// logsPageSize is how many records the logs page shows at a time.
const logsPageSize = 50

// logRow is one ledger record of the logs page.
type logRow struct {
	ID          string  `json:"id"`
	CreatedAt   string  `json:"created_at"`
	TraceID     string  `json:"trace_id"`
	APIKey      string  `json:"api_key"`
	Provider    string  `json:"provider"`
	Model       string  `json:"model"`
	Status      int     `json:"status"`
	Stream      bool    `json:"stream"`
	InputTokens int64   `json:"input_tokens"`
	OutTokens   int64   `json:"output_tokens"`
	CostUSD     string  `json:"cost_usd"`
	LatencyMS   float64 `json:"response_time"`
}

type logsData struct {
	Key, Model, Status string
	// Provider and Workspace narrow to one provider and one workspace
	// (the breakdowns' drill-down).
	Provider, Workspace string
	// From and To are datetime-local values (UTC); Meta is key=value;
	// Trace a trace id.
	From, To, Meta, Trace string
	Logs                  []logRow
	Total                 int64
	// TotalCapped says the API stopped counting at Total (there are more).
	TotalCapped bool
	Page        int
	Prev, Next  string
}

// filterValue keeps a filter the user typed within what the API takes.
func filterValue(r *http.Request, name string) string {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if len(v) > 256 {
		v = v[:256]
	}
	return v
}

// logsPage lists the ledger's records the signed-in key may read, newest
// first, filtered by key, model, status, provider, workspace, time,
// metadata and trace id: one API call per page.
func (h *Handler) logsPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &logsData{Key: filterValue(r, "key"), Model: filterValue(r, "model"), Status: filterValue(r, "status"),
		Provider: filterValue(r, "provider"), Workspace: filterValue(r, "workspace"),
		From: filterValue(r, "from"), To: filterValue(r, "to"), Meta: filterValue(r, "meta"), Trace: filterValue(r, "trace")}
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = min(max(d.Page, 0), 1<<20)
	q := url.Values{"page_size": {strconv.Itoa(logsPageSize)}, "current_page": {strconv.Itoa(d.Page)}}
	if d.Key != "" {
		q.Set("api_key_ids", d.Key)
	}
	if d.Model != "" {
		q.Set("ai_org_model", d.Model)
	}
	if d.Status != "" {
		q.Set("status_code", d.Status)
	}
	if d.Provider != "" {
		q.Set("providers", d.Provider)
	}
	if d.Workspace != "" {
		q.Set("workspace_id", d.Workspace)
	}
	if d.Trace != "" {
		q.Set("trace_id", d.Trace)
	}
	for name, v := range map[string]string{"time_of_generation_min": d.From, "time_of_generation_max": d.To} {
		if v == "" {
			continue
		}
		tm, err := time.Parse("2006-01-02T15:04", v)
		if err != nil {
			h.renderFor(w, r, c, http.StatusBadRequest, "logs", &page{Title: "Logs", Err: "times are YYYY-MM-DDTHH:MM (UTC)", Data: d})
			return
		}
		q.Set(name, tm.UTC().Format(time.RFC3339))
	}
	if d.Meta != "" {
		k, v, ok := strings.Cut(d.Meta, "=")
		if !ok || k == "" {
			h.renderFor(w, r, c, http.StatusBadRequest, "logs", &page{Title: "Logs", Err: "metadata is key=value", Data: d})
			return
		}
		b, _ := json.Marshal(map[string]string{k: v})
		q.Set("metadata", string(b))
	}
	var list struct {
		Total       int64    `json:"total"`
		TotalCapped bool     `json:"total_capped"`
		Data        []logRow `json:"data"`
	}
	p := &page{Title: "Logs", Data: d}
	if err := h.getJSON(r, c.s.key, "/logs", q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "logs", p)
		return
	}
	d.Logs, d.Total, d.TotalCapped = list.Data, list.Total, list.TotalCapped
	link := func(pg int) string {
		v := url.Values{"page": {strconv.Itoa(pg)}}
		for k, s := range map[string]string{"key": d.Key, "model": d.Model, "status": d.Status, "provider": d.Provider, "workspace": d.Workspace, "from": d.From, "to": d.To, "meta": d.Meta, "trace": d.Trace} {
			if s != "" {
				v.Set(k, s)
			}
		}
		return "?" + v.Encode()
	}
	if d.Page > 0 {
		d.Prev = link(d.Page - 1)
	}
	if int64((d.Page+1)*logsPageSize) < d.Total || d.TotalCapped && len(d.Logs) == logsPageSize {
		d.Next = link(d.Page + 1)
	}
	h.renderFor(w, r, c, http.StatusOK, "logs", p)
}

// maxMessage bounds the playground's prompt.
const maxMessage = 32 << 10

type playData struct {
	Model, VirtualKey, Config, Message string
	Answer                             string
	Status                             int
	TraceID                            string
	Cost                               string
	Sent                               bool
}

// playground sends one chat message through the gateway's normal
// request path (/v1/chat/completions with the signed-in key), so the
// key's limits, routing and logging apply as to any client.
func (h *Handler) playground(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &playData{Model: "gpt-4o-mini"}
	p := &page{Title: "Playground", Data: d}
	if r.Method != http.MethodPost {
		h.renderFor(w, r, c, http.StatusOK, "playground", p)
		return
	}
	d.Model = strings.TrimSpace(r.PostFormValue("model"))
	d.VirtualKey = strings.TrimSpace(r.PostFormValue("virtual_key"))
	d.Config = strings.TrimSpace(r.PostFormValue("config"))
	d.Message = r.PostFormValue("message")
	if d.Model == "" || d.Message == "" || len(d.Message) > maxMessage || len(d.Model) > 256 || len(d.VirtualKey) > 256 || len(d.Config) > 256 {
		p.Err = fmt.Sprintf("give a model and a message of at most %d bytes", maxMessage)
		h.renderFor(w, r, c, http.StatusBadRequest, "playground", p)
		return
	}
	body := map[string]any{"model": d.Model, "messages": []map[string]string{{"role": "user", "content": d.Message}}}
	status, hdr, raw, err := h.call(r.Context(), r, c.s.key, http.MethodPost, "/chat/completions", nil, body,
		"x-gateway-virtual-key", d.VirtualKey, "x-gateway-config", d.Config)
	d.Sent = true
	d.Status = status
	if hdr != nil {
		d.TraceID, d.Cost = hdr.Get("X-Gateway-Trace-Id"), hdr.Get("X-Gateway-Cost")
	}
	if err != nil {
		// The gateway's refusal is the playground's answer, shown as it
		// came (the page itself worked).
		p.Err = err.Error()
		h.renderFor(w, r, c, http.StatusOK, "playground", p)
		return
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(raw, &out) == nil && len(out.Choices) > 0 {
		d.Answer = out.Choices[0].Message.Content
	}
	h.renderFor(w, r, c, http.StatusOK, "playground", p)
}
