package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// fakeMessageBatches is Anthropic's Message Batches API as its reference
// documents it: POST /v1/messages/batches with {"requests":[{custom_id,
// params}]} answers a message_batch object (processing_status
// in_progress, canceling, ended; request_counts by result); GET
// /v1/messages/batches/{id} reads it, POST …/cancel cancels it, and GET
// …/results (once ended) is JSONL of {custom_id, result:{type:
// succeeded|errored|canceled|expired, …}}. It checks what the real API
// checks: x-api-key, anthropic-version, custom_id's pattern and each
// request's model, max_tokens and messages.
type fakeMessageBatches struct {
	*fakeServer
	reply []byte // the message of a succeeded line (its model replaced)

	mu sync.Mutex
	// hold keeps jobs in progress until it is cleared (or they are
	// cancelled); expireFrom, when ≥ 0, ends a job with its lines from
	// that index on expired, as Anthropic does after 24 hours.
	hold       bool
	expireFrom int
	jobs       map[string]*fakeJob
	creates    int
	gets       int
	cancels    int
	messages   int // on-demand /v1/messages calls, which a native batch never makes
}

type fakeJob struct {
	id       string
	reqs     []fakeJobReq
	canceled bool
}

type fakeJobReq struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

var fakeCustomID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func newFakeMessageBatches(t testing.TB, reply []byte) *fakeMessageBatches {
	f := &fakeMessageBatches{reply: reply, expireFrom: -1, jobs: map[string]*fakeJob{}}
	f.fakeServer = newFakeServer(t, f.handle)
	return f
}

func (f *fakeMessageBatches) setHold(v bool) {
	f.mu.Lock()
	f.hold = v
	f.mu.Unlock()
}

func (f *fakeMessageBatches) counts() (creates, gets, cancels, messages int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.gets, f.cancels, f.messages
}

// job returns the only job, nil when none was created.
func (f *fakeMessageBatches) job() *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		return j
	}
	return nil
}

func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	writeJSON(w, status, b)
}

func (f *fakeMessageBatches) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get("x-api-key") != anthropicKey {
		writeAnthropicError(w, 401, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		writeAnthropicError(w, 400, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rest, isBatches := strings.CutPrefix(r.URL.Path, "/v1/messages/batches")
	switch {
	case r.URL.Path == "/v1/messages":
		f.messages++
		writeAnthropicError(w, 500, "api_error", "a native batch must not call the Messages API")
	case isBatches && rest == "" && r.Method == http.MethodPost:
		f.create(w, body)
	case isBatches && r.Method == http.MethodGet && f.jobs[strings.Trim(rest, "/")] != nil:
		f.gets++
		writeJSON(w, 200, f.object(f.jobs[strings.Trim(rest, "/")]))
	case isBatches && r.Method == http.MethodPost && strings.HasSuffix(rest, "/cancel") && f.jobs[strings.Trim(strings.TrimSuffix(rest, "/cancel"), "/")] != nil:
		f.cancels++
		j := f.jobs[strings.Trim(strings.TrimSuffix(rest, "/cancel"), "/")]
		j.canceled = true
		writeJSON(w, 200, f.object(j))
	case isBatches && r.Method == http.MethodGet && strings.HasSuffix(rest, "/results") && f.jobs[strings.Trim(strings.TrimSuffix(rest, "/results"), "/")] != nil:
		j := f.jobs[strings.Trim(strings.TrimSuffix(rest, "/results"), "/")]
		if !f.ended(j) {
			writeAnthropicError(w, 400, "invalid_request_error", "batch results are not available until processing ends")
			return
		}
		w.Header().Set("Content-Type", "application/binary")
		for i, q := range j.reqs {
			line, _ := json.Marshal(map[string]any{"custom_id": q.CustomID, "result": f.result(j, i)})
			_, _ = w.Write(append(line, '\n'))
		}
	default:
		writeAnthropicError(w, 404, "not_found_error", "Not found")
	}
}

func (f *fakeMessageBatches) create(w http.ResponseWriter, body []byte) {
	var in struct {
		Requests []fakeJobReq `json:"requests"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Requests) == 0 {
		writeAnthropicError(w, 400, "invalid_request_error", "requests: at least one request is required")
		return
	}
	seen := map[string]bool{}
	for i, q := range in.Requests {
		p := gjson.ParseBytes(q.Params)
		switch {
		case !fakeCustomID.MatchString(q.CustomID) || seen[q.CustomID]:
			writeAnthropicError(w, 400, "invalid_request_error", fmt.Sprintf("requests.%d.custom_id: invalid or repeated", i))
			return
		case p.Get("model").Str == "" || p.Get("max_tokens").Int() == 0 || !p.Get("messages").IsArray() || p.Get("stream").Exists():
			writeAnthropicError(w, 400, "invalid_request_error", fmt.Sprintf("requests.%d.params: model, max_tokens and messages are required, stream is not allowed", i))
			return
		}
		seen[q.CustomID] = true
	}
	f.creates++
	j := &fakeJob{id: fmt.Sprintf("msgbatch_%024d", f.creates), reqs: in.Requests}
	f.jobs[j.id] = j
	writeJSON(w, 200, f.object(j))
}

func (f *fakeMessageBatches) ended(j *fakeJob) bool { return j.canceled || !f.hold }

// result is line i's result: after a cancel only the first line ran; an
// unknown model errs as the Messages API would.
func (f *fakeMessageBatches) result(j *fakeJob, i int) map[string]any {
	p := gjson.ParseBytes(j.reqs[i].Params)
	switch {
	case j.canceled && i > 0:
		return map[string]any{"type": "canceled"}
	case f.expireFrom >= 0 && i >= f.expireFrom:
		return map[string]any{"type": "expired"}
	case p.Get("model").Str == "claude-unknown":
		return map[string]any{"type": "errored", "error": map[string]any{"type": "error",
			"error": map[string]string{"type": "not_found_error", "message": "model: claude-unknown"}}}
	}
	msg := bytes.Replace(f.reply, []byte(`"claude-3-5-haiku-20241022"`), []byte(`"`+p.Get("model").Str+`"`), 1)
	return map[string]any{"type": "succeeded", "message": json.RawMessage(msg)}
}

func (f *fakeMessageBatches) object(j *fakeJob) []byte {
	status := "in_progress"
	c := map[string]int{"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	if f.ended(j) {
		status = "ended"
		for i := range j.reqs {
			typ := f.result(j, i)["type"].(string)
			c[typ]++
		}
	} else {
		c["processing"] = len(j.reqs)
		if j.canceled {
			status = "canceling"
		}
	}
	b, _ := json.Marshal(map[string]any{"id": j.id, "type": "message_batch", "processing_status": status, "request_counts": c,
		"created_at": "2026-12-02T16:00:00Z", "expires_at": "2026-12-03T16:00:00Z", "ended_at": nil, "cancel_initiated_at": nil,
		"results_url": nil, "archived_at": nil})
	return b
}
