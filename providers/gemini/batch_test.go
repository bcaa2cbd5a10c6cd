package gemini

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestBatchParse(t *testing.T) {
	op := func(state, extra string) string {
		return `{"name":"batches/abc123","metadata":{"state":"` + state + `","batchStats":{"requestCount":"10","successfulRequestCount":"3","failedRequestCount":"1","pendingRequestCount":"6"}}` + extra + `}`
	}
	for _, tc := range []struct {
		name, body         string
		ended, window, bad bool
		failure            string
	}{
		{name: "pending", body: op("BATCH_STATE_PENDING", "")},
		{name: "succeeded but not done", body: op("BATCH_STATE_SUCCEEDED", "")},
		{name: "succeeded", body: op("BATCH_STATE_SUCCEEDED", `,"done":true`), ended: true},
		{name: "expired", body: op("BATCH_STATE_EXPIRED", `,"done":true`), ended: true, window: true},
		{name: "failed", body: op("BATCH_STATE_FAILED", `,"done":true,"error":{"code":3,"message":"too large"}`), ended: true, failure: "too large"},
		{name: "unknown state", body: op("BATCH_STATE_GONE", ""), bad: true},
		{name: "not a batch", body: strings.Replace(op("BATCH_STATE_PENDING", ""), "batches/", "files/", 1), bad: true},
		{name: "name twice", body: op("BATCH_STATE_PENDING", `,"name":"batches/other"`), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := parseBatch([]byte(tc.body))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", j)
				}
				return
			}
			if err != nil || j.ID != "abc123" || j.Ended != tc.ended || j.WindowEnded != tc.window || !strings.Contains(j.Failure, tc.failure) ||
				(tc.failure == "") != (j.Failure == "") || j.Succeeded != 3 || j.Errored != 1 || j.Processing != 6 {
				t.Fatalf("%+v, %v", j, err)
			}
		})
	}
}

func TestBatchParseResult(t *testing.T) {
	for _, tc := range []struct {
		name, line, kind string
		status           int
		bad              bool
	}{
		{name: "answer", line: `{"response":{"candidates":[]},"metadata":{"key":"gw-3"}}`, kind: providers.BatchSucceeded, status: 200},
		{name: "invalid argument", line: `{"error":{"code":3,"message":"bad"},"metadata":{"key":"gw-3"}}`, kind: providers.BatchErrored, status: 400},
		{name: "exhausted", line: `{"error":{"code":8,"message":"quota"},"metadata":{"key":"gw-3"}}`, kind: providers.BatchErrored, status: 429},
		{name: "unknown code", line: `{"error":{"code":99},"metadata":{"key":"gw-3"}}`, kind: providers.BatchErrored, status: 500},
		{name: "no key", line: `{"response":{}}`, bad: true},
		{name: "key twice", line: `{"response":{},"metadata":{"key":"gw-3","key":"gw-4"}}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := provider{}.ParseBatchResult([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", r)
				}
				return
			}
			if err != nil || r.ID != "gw-3" || r.Kind != tc.kind || r.Status != tc.status ||
				(tc.kind == providers.BatchErrored && gjson.GetBytes(r.Body, "error.code").Int() != int64(tc.status)) {
				t.Fatalf("%+v (%s), %v", r, r.Body, err)
			}
		})
	}
}
