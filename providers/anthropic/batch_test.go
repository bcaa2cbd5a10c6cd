package anthropic

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestWriteBatchCreate(t *testing.T) {
	lines := func(fn func(id string, body []byte) error) error {
		for i, b := range []string{`{"model":"m","max_tokens":1,"messages":[]}`, `{"model":"n","max_tokens":2,"messages":[]}`} {
			if err := fn([]string{"gw-0", "gw-1"}[i], []byte(b)); err != nil {
				return err
			}
		}
		return nil
	}
	var w bytes.Buffer
	if err := (provider{}).WriteBatchCreate(&w, lines); err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(w.Bytes())
	if !gjson.ValidBytes(w.Bytes()) || r.Get("requests.#").Int() != 2 || r.Get("requests.1.custom_id").Str != "gw-1" || r.Get("requests.1.params.max_tokens").Int() != 2 {
		t.Fatalf("create body %s", w.Bytes())
	}
	bad := func(fn func(id string, body []byte) error) error { return fn("not/valid", []byte(`{}`)) }
	if err := (provider{}).WriteBatchCreate(&bytes.Buffer{}, bad); err == nil {
		t.Fatal("an id Anthropic refuses was written")
	}
	stop := errors.New("stop")
	if err := (provider{}).WriteBatchCreate(&bytes.Buffer{}, func(func(string, []byte) error) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("the lines' error: %v", err)
	}
}

func TestParseBatchJob(t *testing.T) {
	tests := []struct {
		name, body string
		want       providers.BatchJob
		bad        bool
	}{
		{"in progress", `{"id":"msgbatch_01","type":"message_batch","processing_status":"in_progress","request_counts":{"processing":3,"succeeded":0,"errored":0,"canceled":0,"expired":0}}`,
			providers.BatchJob{ID: "msgbatch_01", Processing: 3}, false},
		{"ended", `{"id":"msgbatch_01","type":"message_batch","processing_status":"ended","request_counts":{"processing":0,"succeeded":2,"errored":1,"canceled":1,"expired":1}}`,
			providers.BatchJob{ID: "msgbatch_01", Ended: true, Succeeded: 2, Errored: 1, Canceled: 1, Expired: 1}, false},
		{"not a batch", `{"id":"msg_01","type":"message"}`, providers.BatchJob{}, true},
		{"unknown status", `{"id":"msgbatch_01","type":"message_batch","processing_status":"paused"}`, providers.BatchJob{}, true},
		{"id for a path", `{"id":"../x","type":"message_batch","processing_status":"ended"}`, providers.BatchJob{}, true},
		{"negative count", `{"id":"msgbatch_01","type":"message_batch","processing_status":"ended","request_counts":{"succeeded":-1}}`, providers.BatchJob{}, true},
		{"duplicate member", `{"id":"msgbatch_01","id":"msgbatch_02","type":"message_batch","processing_status":"ended"}`, providers.BatchJob{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (provider{}).ParseBatchJob([]byte(tt.body))
			if (err != nil) != tt.bad || got != tt.want {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestParseBatchResult(t *testing.T) {
	tests := []struct {
		name, line string
		kind       string
		status     int
		body       string // a path the body must have
		bad        bool
	}{
		{"succeeded", `{"custom_id":"gw-0","result":{"type":"succeeded","message":{"type":"message","content":[]}}}`, providers.BatchSucceeded, 200, "content", false},
		{"errored envelope", `{"custom_id":"gw-1","result":{"type":"errored","error":{"type":"error","error":{"type":"not_found_error","message":"model: x"}}}}`, providers.BatchErrored, 404, "error.message", false},
		{"errored inner", `{"custom_id":"gw-1","result":{"type":"errored","error":{"type":"invalid_request_error","message":"bad"}}}`, providers.BatchErrored, 400, "error.type", false},
		{"errored unknown type", `{"custom_id":"gw-1","result":{"type":"errored","error":{"type":"error","error":{"type":"novel","message":"?"}}}}`, providers.BatchErrored, 500, "error", false},
		{"canceled", `{"custom_id":"gw-2","result":{"type":"canceled"}}`, providers.BatchCanceled, 0, "", false},
		{"expired", `{"custom_id":"gw-3","result":{"type":"expired"}}`, providers.BatchExpired, 0, "", false},
		{"no custom_id", `{"result":{"type":"expired"}}`, "", 0, "", true},
		{"unknown kind", `{"custom_id":"gw-3","result":{"type":"later"}}`, "", 0, "", true},
		{"succeeded without message", `{"custom_id":"gw-3","result":{"type":"succeeded"}}`, "", 0, "", true},
		{"not json", `{"custom_id":`, "", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := (provider{}).ParseBatchResult([]byte(tt.line))
			if (err != nil) != tt.bad {
				t.Fatalf("err %v", err)
			}
			if tt.bad {
				return
			}
			if r.Kind != tt.kind || r.Status != tt.status || (tt.body != "" && !gjson.GetBytes(r.Body, tt.body).Exists()) {
				t.Fatalf("got %+v (%s)", r, r.Body)
			}
		})
	}
}
