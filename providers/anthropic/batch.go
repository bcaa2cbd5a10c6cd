package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Anthropic's Message Batches API (POST /v1/messages/batches): a job of
// up to 100,000 Messages API requests, each {"custom_id","params"} with
// params the body of POST /v1/messages, processed within 24 hours at half
// the on-demand price. Its results are JSON lines {"custom_id","result":
// {"type":"succeeded","message"} | {"type":"errored","error"} |
// {"type":"canceled"} | {"type":"expired"}}.

// batchIDPattern is what Anthropic accepts as a custom_id (and as a batch
// id in a path, whose ids are "msgbatch_…").
var batchIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

var _ providers.BatchJobs = provider{}

// BatchPaths implements providers.BatchJobs.
func (provider) BatchPaths(jobID string) providers.BatchPaths {
	id := url.PathEscape(jobID)
	return providers.BatchPaths{
		Create:  "/messages/batches",
		Get:     "/messages/batches/" + id,
		Cancel:  "/messages/batches/" + id + "/cancel",
		Results: "/messages/batches/" + id + "/results",
	}
}

// WriteBatchCreate implements providers.BatchJobs: {"requests":[…]},
// written a line at a time.
func (provider) WriteBatchCreate(w io.Writer, lines providers.BatchLines) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString(`{"requests":[`); err != nil {
		return err
	}
	first := true
	err := lines(func(id string, body []byte) error {
		if !batchIDPattern.MatchString(id) {
			return fmt.Errorf("anthropic: batch line id %q is not a valid custom_id", id)
		}
		if !first {
			_ = bw.WriteByte(',')
		}
		first = false
		_, _ = bw.WriteString(`{"custom_id":"`)
		_, _ = bw.WriteString(id)
		_, _ = bw.WriteString(`","params":`)
		_, err := bw.Write(body)
		_ = bw.WriteByte('}')
		return err
	})
	if err != nil {
		return err
	}
	if _, err := bw.WriteString(`]}`); err != nil {
		return err
	}
	return bw.Flush()
}

// ParseBatchJob implements providers.BatchJobs: a message_batch object.
func (provider) ParseBatchJob(body []byte) (providers.BatchJob, error) {
	if err := jsonlimit.Object(body); err != nil {
		return providers.BatchJob{}, fmt.Errorf("anthropic: message batch: %w", err)
	}
	var b struct {
		ID     string `json:"id"`
		Type   string `json:"type"`
		Status string `json:"processing_status"`
		Counts struct {
			Processing int `json:"processing"`
			Succeeded  int `json:"succeeded"`
			Errored    int `json:"errored"`
			Canceled   int `json:"canceled"`
			Expired    int `json:"expired"`
		} `json:"request_counts"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return providers.BatchJob{}, fmt.Errorf("anthropic: message batch: %w", err)
	}
	if b.Type != "message_batch" || !batchIDPattern.MatchString(b.ID) {
		return providers.BatchJob{}, errors.New("anthropic: the answer is not a message batch")
	}
	switch b.Status {
	case "in_progress", "canceling", "ended":
	default:
		return providers.BatchJob{}, fmt.Errorf("anthropic: message batch processing_status %q", b.Status)
	}
	c := b.Counts
	if c.Processing < 0 || c.Succeeded < 0 || c.Errored < 0 || c.Canceled < 0 || c.Expired < 0 {
		return providers.BatchJob{}, errors.New("anthropic: message batch request_counts below zero")
	}
	return providers.BatchJob{ID: b.ID, Ended: b.Status == "ended", Processing: c.Processing, Succeeded: c.Succeeded,
		Errored: c.Errored, Canceled: c.Canceled, Expired: c.Expired}, nil
}

// errorStatus is the HTTP status of each Messages API error type, as
// Anthropic's error reference lists them: an errored batch line carries
// the type, not the status its on-demand call would have had.
var errorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

// ParseBatchResult implements providers.BatchJobs. An errored line's Body
// is the error in the Messages API's envelope ({"type":"error","error":
// {…}}), whether the result holds the envelope or, as older answers do,
// the inner error alone.
func (provider) ParseBatchResult(line []byte) (providers.BatchResult, error) {
	if err := jsonlimit.Object(line); err != nil {
		return providers.BatchResult{}, fmt.Errorf("anthropic: batch result: %w", err)
	}
	r := gjson.ParseBytes(line)
	id := r.Get("custom_id")
	if id.Type != gjson.String || id.Str == "" {
		return providers.BatchResult{}, errors.New("anthropic: batch result without custom_id")
	}
	res := r.Get("result")
	out := providers.BatchResult{ID: id.Str, Kind: res.Get("type").Str}
	switch out.Kind {
	case providers.BatchSucceeded:
		msg := res.Get("message")
		if !msg.IsObject() {
			return providers.BatchResult{}, errors.New("anthropic: succeeded batch result without a message")
		}
		out.Status, out.Body = 200, []byte(msg.Raw)
	case providers.BatchErrored:
		e := res.Get("error")
		inner := e
		if e.Get("error").IsObject() {
			inner = e.Get("error")
			out.Body = []byte(e.Raw)
		} else if e.IsObject() {
			out.Body = append(append([]byte(`{"type":"error","error":`), e.Raw...), '}')
		} else {
			out.Body = []byte(`{"type":"error","error":{"type":"api_error","message":"the provider reported an error without details"}}`)
		}
		out.Status = errorStatus[inner.Get("type").Str]
		if out.Status == 0 {
			out.Status = 500
		}
	case providers.BatchCanceled, providers.BatchExpired:
	default:
		return providers.BatchResult{}, fmt.Errorf("anthropic: batch result type %q", out.Kind)
	}
	out.Body = bytes.Clone(out.Body)
	return out, nil
}
