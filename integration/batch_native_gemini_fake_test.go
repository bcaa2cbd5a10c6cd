package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// fakeGeminiBatches is the Gemini API's batch mode as its reference gives
// it: POST /v1beta/models/{m}:batchGenerateContent with {"batch":
// {display_name, input_config:{requests:{requests:[{request, metadata:
// {key}}]}}}} answers the batch, a long-running operation {name
// batches/{id}, metadata {state BATCH_STATE_*, batchStats with int64
// counts as strings}, done, response {inlinedResponses:
// {inlinedResponses:[{response|error, metadata}]}} once done}; GET
// /v1beta/batches/{id} reads it and POST …:cancel cancels it. Every call
// must carry x-goog-api-key.
type fakeGeminiBatches struct {
	*fakeServer

	mu         sync.Mutex
	hold       bool
	expireFrom int
	jobs       map[string]*geminiJob
	creates    int
	gets       int
	cancels    int
	onDemand   int
}

type geminiJob struct {
	id, model string
	reqs      []gjson.Result
	canceled  bool
}

var geminiBatchPath = regexp.MustCompile(`^/v1beta/(?:models/([a-z0-9.-]+):batchGenerateContent|batches/([a-z0-9]+)(:cancel)?)$`)

func newFakeGeminiBatches(t testing.TB) *fakeGeminiBatches {
	f := &fakeGeminiBatches{expireFrom: -1, jobs: map[string]*geminiJob{}}
	f.fakeServer = newFakeServer(t, f.handle)
	return f
}

func (f *fakeGeminiBatches) setHold(v bool) {
	f.mu.Lock()
	f.hold = v
	f.mu.Unlock()
}

func (f *fakeGeminiBatches) counts() (creates, gets, cancels, onDemand int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.gets, f.cancels, f.onDemand
}

func (f *fakeGeminiBatches) job() *geminiJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		return j
	}
	return nil
}

func (f *fakeGeminiBatches) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get("x-goog-api-key") != googleKey || r.URL.Query().Has("key") {
		googleError(w, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := geminiBatchPath.FindStringSubmatch(r.URL.Path)
	switch {
	case m == nil:
		f.onDemand++
		googleError(w, 500, "INTERNAL", "a native batch must not make on-demand calls")
	case m[1] != "" && r.Method == http.MethodPost:
		f.create(w, m[1], body)
	case f.jobs[m[2]] == nil:
		googleError(w, 404, "NOT_FOUND", "Requested entity was not found.")
	case m[3] == "" && r.Method == http.MethodGet:
		f.gets++
		writeJSON(w, 200, f.object(f.jobs[m[2]]))
	case m[3] == ":cancel" && r.Method == http.MethodPost:
		f.cancels++
		f.jobs[m[2]].canceled = true
		writeJSON(w, 200, []byte(`{}`))
	default:
		googleError(w, 404, "NOT_FOUND", "unknown call")
	}
}

func (f *fakeGeminiBatches) create(w http.ResponseWriter, model string, body []byte) {
	b := gjson.ParseBytes(body)
	reqs := b.Get("batch.input_config.requests.requests").Array()
	if !json.Valid(body) || b.Get("batch.display_name").Str == "" || len(reqs) == 0 {
		googleError(w, 400, "INVALID_ARGUMENT", "batch.input_config.requests is required")
		return
	}
	for i, q := range reqs {
		if !q.Get("request.contents").IsArray() || q.Get("metadata.key").Str == "" {
			googleError(w, 400, "INVALID_ARGUMENT", fmt.Sprintf("requests[%d]: request.contents and metadata.key are required", i))
			return
		}
	}
	f.creates++
	j := &geminiJob{id: fmt.Sprintf("gwbatch%d", f.creates), model: model, reqs: reqs}
	f.jobs[j.id] = j
	writeJSON(w, 200, f.object(j))
}

func (f *fakeGeminiBatches) object(j *geminiJob) []byte {
	state, n := "BATCH_STATE_SUCCEEDED", len(j.reqs)
	switch {
	case j.canceled:
		state, n = "BATCH_STATE_CANCELLED", 1
	case f.hold:
		state, n = "BATCH_STATE_RUNNING", 0
	case f.expireFrom >= 0:
		state, n = "BATCH_STATE_EXPIRED", f.expireFrom
	}
	ok := 0
	var results []map[string]any
	for _, q := range j.reqs[:min(n, len(j.reqs))] {
		res := map[string]any{"metadata": json.RawMessage(q.Get("metadata").Raw)}
		if strings.Contains(q.Get("request.contents.0.parts.0.text").Str, "reject") {
			res["error"] = map[string]any{"code": 3, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}
		} else {
			ok++
			res["response"] = json.RawMessage(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello from Gemini!"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2095,"candidatesTokenCount":503,"totalTokenCount":2598},"modelVersion":"` + j.model + `"}`)
		}
		results = append(results, res)
	}
	op := map[string]any{"name": "batches/" + j.id, "metadata": map[string]any{
		"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch", "model": "models/" + j.model,
		"displayName": "gw", "state": state, "batchStats": map[string]string{"requestCount": fmt.Sprint(len(j.reqs)),
			"successfulRequestCount": fmt.Sprint(ok), "failedRequestCount": fmt.Sprint(len(results) - ok),
			"pendingRequestCount": fmt.Sprint(len(j.reqs) - len(results))}}}
	if state != "BATCH_STATE_RUNNING" {
		op["done"] = true
		op["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
			"inlinedResponses": map[string]any{"inlinedResponses": results}}
	}
	out, _ := json.Marshal(op)
	return out
}
