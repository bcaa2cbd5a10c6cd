package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// The Gemini API's batch mode (POST /v1beta/models/{m}:batchGenerateContent
// with inline requests, GET /v1beta/batches/{id}, POST
// /v1beta/batches/{id}:cancel, with the target's key): a job of one model
// whose requests are {"request": a generateContent body, "metadata":
// {"key"}}, exactly what Prepare sends on demand, so a line is
// translated once, by BuildRequest. The job is a long-running operation
// whose metadata holds its state and counts and whose response, once
// done, lists each request's response or error with its metadata.
// Inline requests are bounded by the API (20 MB per job); the results
// come back inline too, read whole up to maxResults. Batch mode is
// billed at half the on-demand price.

var _ providers.BatchDriver = provider{}

// maxResults bounds a done batch's answer, which holds every result.
const maxResults = 256 << 20

var batchName = regexp.MustCompile(`^batches/([a-zA-Z0-9_-]{1,128})$`)

// BatchReady implements providers.BatchDriver: batch mode needs only
// the key.
func (provider) BatchReady(s *providers.Settings) bool { return s.APIKey != "" }

// BatchOneModel implements providers.BatchDriver.
func (provider) BatchOneModel() bool { return true }

// SubmitBatch implements providers.BatchDriver.
func (p provider) SubmitBatch(ctx context.Context, env *providers.BatchEnv, lines providers.BatchLines) (string, error) {
	model, err := Model(env.Model)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	name, _ := json.Marshal("gateway " + env.Name)
	b.WriteString(`{"batch":{"display_name":` + string(name) + `,"input_config":{"requests":{"requests":[`)
	first := true
	err = lines(func(id string, body []byte) error {
		if !first {
			b.WriteByte(',')
		}
		first = false
		key, _ := json.Marshal(id)
		b.WriteString(`{"request":`)
		b.Write(body)
		b.WriteString(`,"metadata":{"key":` + string(key) + `}}`)
		return nil
	})
	if err != nil {
		return "", err
	}
	b.WriteString(`]}}}}`)
	status, body, err := p.batchCall(ctx, env, http.MethodPost, "/models/"+model+":batchGenerateContent", b.Bytes(), 1<<20)
	if err != nil {
		return "", err
	}
	if status/100 != 2 {
		return "", env.Error(status, body)
	}
	job, err := parseBatch(body)
	if err != nil {
		return "", err
	}
	return job.ID, nil
}

// batchEnded is what each batch state means here: ended or not.
var batchEnded = map[string]bool{
	"BATCH_STATE_PENDING": false, "BATCH_STATE_RUNNING": false,
	"BATCH_STATE_SUCCEEDED": true, "BATCH_STATE_FAILED": true, "BATCH_STATE_CANCELLED": true, "BATCH_STATE_EXPIRED": true,
}

// parseBatch reads a batch operation.
func parseBatch(body []byte) (providers.BatchJob, error) {
	bad := func(why string) error {
		return apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "google: batch: %s", why)
	}
	if err := jsonlimit.Check(body); err != nil || !gjson.ValidBytes(body) {
		return providers.BatchJob{}, bad("not JSON")
	}
	r := gjson.ParseBytes(body)
	m := batchName.FindStringSubmatch(r.Get("name").Str)
	state := r.Get("metadata.state").Str
	ended, known := batchEnded[state]
	if m == nil || !known {
		return providers.BatchJob{}, bad(fmt.Sprintf("not a batch (name %q, state %q)", r.Get("name").Str, state))
	}
	// int64 counts travel as JSON strings.
	count := func(k string) int { return max(int(r.Get("metadata.batchStats."+k).Int()), 0) }
	job := providers.BatchJob{ID: m[1], Ended: ended && r.Get("done").Bool(), Succeeded: count("successfulRequestCount"),
		Errored: count("failedRequestCount"), Processing: count("pendingRequestCount"), WindowEnded: state == "BATCH_STATE_EXPIRED"}
	if state == "BATCH_STATE_FAILED" {
		job.Failure = "the Gemini API batch failed"
		if msg := r.Get("error.message").Str; msg != "" {
			job.Failure += ": " + msg
		}
	}
	return job, nil
}

// GetBatch implements providers.BatchDriver.
func (p provider) GetBatch(ctx context.Context, env *providers.BatchEnv, jobID string) (providers.BatchJob, error) {
	status, body, err := p.batchCall(ctx, env, http.MethodGet, "/batches/"+jobID, nil, 1<<20)
	if err != nil {
		return providers.BatchJob{}, err
	}
	if status/100 != 2 {
		return providers.BatchJob{}, env.Error(status, body)
	}
	return parseBatch(body)
}

// CancelBatch implements providers.BatchDriver.
func (p provider) CancelBatch(ctx context.Context, env *providers.BatchEnv, jobID string) error {
	status, body, err := p.batchCall(ctx, env, http.MethodPost, "/batches/"+jobID+":cancel", []byte(`{}`), 1<<20)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return env.Error(status, body)
	}
	return nil
}

// BatchResults implements providers.BatchDriver: the done batch's
// inlined responses, a JSON line each.
func (p provider) BatchResults(ctx context.Context, env *providers.BatchEnv, jobID string) (io.ReadCloser, error) {
	status, body, err := p.batchCall(ctx, env, http.MethodGet, "/batches/"+jobID, nil, maxResults)
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, env.Error(status, body)
	}
	var out bytes.Buffer
	gjson.GetBytes(body, "response.inlinedResponses.inlinedResponses").ForEach(func(_, v gjson.Result) bool {
		out.WriteString(v.Raw)
		out.WriteByte('\n')
		return true
	})
	return io.NopCloser(&out), nil
}

// ParseBatchResult implements providers.BatchDriver: an inlined
// response is a generateContent answer or a google.rpc.Status error, put
// in Google's error envelope with its HTTP status.
func (provider) ParseBatchResult(line []byte) (providers.BatchResult, error) {
	if err := jsonlimit.Object(line); err != nil {
		return providers.BatchResult{}, fmt.Errorf("google: batch result: %w", err)
	}
	r := gjson.ParseBytes(line)
	id := r.Get("metadata.key").Str
	if id == "" {
		return providers.BatchResult{}, errors.New("google: batch result without its key")
	}
	if res := r.Get("response"); res.IsObject() {
		return providers.BatchResult{ID: id, Kind: providers.BatchSucceeded, Status: http.StatusOK, Body: []byte(res.Raw)}, nil
	}
	e := r.Get("error")
	status := rpcStatus[e.Get("code").Int()]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	msg := e.Get("message").Str
	if msg == "" {
		msg = "the provider reported an error without details"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": e.Get("status").Str}})
	return providers.BatchResult{ID: id, Kind: providers.BatchErrored, Status: status, Body: body}, nil
}

// rpcStatus is the HTTP status of each google.rpc.Code a batch result's
// error carries (the API's own mapping).
var rpcStatus = map[int64]int{
	1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401,
}

// batchCall sends a batch mode call, prepared as a native call is (the
// base URL or custom host and the key), and reads its answer, at most
// limit bytes.
func (p provider) batchCall(ctx context.Context, env *providers.BatchEnv, method, path string, body []byte, limit int64) (int, []byte, error) {
	c := providers.Call{Op: providers.OpProxy, Method: method, Path: path, Header: http.Header{}, Egress: env.Egress}
	u := providers.Upstream{Header: make(http.Header, 4)}
	if err := p.Prepare(&c, env.Settings, &u); err != nil {
		return 0, nil, err
	}
	if body != nil {
		u.Header.Set("Content-Type", "application/json")
	}
	return providers.BatchCall(ctx, env, method, u.URL.String(), u.Header, body, limit)
}
