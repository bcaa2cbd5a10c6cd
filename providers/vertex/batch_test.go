package vertex

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestBatchParseJob(t *testing.T) {
	job := func(state, extra string) string {
		return `{"name":"projects/p/locations/us-central1/batchPredictionJobs/123","state":"` + state +
			`","completionStats":{"successfulCount":"3","failedCount":"1","incompleteCount":"6"}` + extra + `}`
	}
	for _, tc := range []struct {
		name, body, outDir string
		ended, window, bad bool
		failure            string
	}{
		{name: "pending", body: job("JOB_STATE_PENDING", "")},
		{name: "cancelling", body: job("JOB_STATE_CANCELLING", "")},
		{name: "succeeded", body: job("JOB_STATE_SUCCEEDED", `,"outputInfo":{"gcsOutputDirectory":"gs://b/p/out"}`), ended: true, outDir: "gs://b/p/out"},
		{name: "partly", body: job("JOB_STATE_PARTIALLY_SUCCEEDED", ""), ended: true},
		{name: "cancelled", body: job("JOB_STATE_CANCELLED", ""), ended: true},
		{name: "expired", body: job("JOB_STATE_EXPIRED", ""), ended: true, window: true},
		{name: "failed", body: job("JOB_STATE_FAILED", `,"error":{"code":3,"message":"bad input"}`), ended: true, failure: "bad input"},
		{name: "unknown state", body: job("JOB_STATE_EXPLODED", ""), bad: true},
		{name: "not a job", body: strings.Replace(job("JOB_STATE_SUCCEEDED", ""), "batchPredictionJobs", "customJobs", 1), bad: true},
		{name: "state twice", body: job("JOB_STATE_PENDING", `,"state":"JOB_STATE_SUCCEEDED"`), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, dir, err := parseJob([]byte(tc.body))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", j)
				}
				return
			}
			if err != nil || j.ID != "123" || j.Ended != tc.ended || j.WindowEnded != tc.window || dir != tc.outDir ||
				!strings.Contains(j.Failure, tc.failure) || (tc.failure == "") != (j.Failure == "") || j.Succeeded != 3 || j.Errored != 1 || j.Processing != 6 {
				t.Fatalf("%+v %q, %v", j, dir, err)
			}
		})
	}
}

func TestBatchParseResult(t *testing.T) {
	p := &provider{}
	for _, tc := range []struct {
		name, line, kind, msg string
		bad                   bool
	}{
		{name: "answer", line: `{"status":"","request":{"contents":[],"labels":{"gateway_line":"gw-3"}},"response":{"candidates":[]}}`, kind: providers.BatchSucceeded},
		{name: "error", line: `{"status":"Bad Request: invalid","request":{"labels":{"gateway_line":"gw-3"}}}`, kind: providers.BatchErrored, msg: "Bad Request: invalid"},
		{name: "no details", line: `{"request":{"labels":{"gateway_line":"gw-3"}}}`, kind: providers.BatchErrored, msg: "without details"},
		{name: "no label", line: `{"request":{"contents":[]},"response":{}}`, bad: true},
		{name: "label twice", line: `{"request":{"labels":{"gateway_line":"gw-3","gateway_line":"gw-4"}},"response":{}}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := p.ParseBatchResult([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", r)
				}
				return
			}
			if err != nil || r.ID != "gw-3" || r.Kind != tc.kind || !strings.Contains(gjson.GetBytes(r.Body, "error.message").Str, tc.msg) {
				t.Fatalf("%+v (%s), %v", r, r.Body, err)
			}
		})
	}
}

func TestBatchReady(t *testing.T) {
	p := &provider{}
	for _, tc := range []struct {
		s     providers.Settings
		ready bool
	}{
		{providers.Settings{APIKey: "ya29.t", CloudCBatchGCSURI: "gs://b/p"}, true},
		{providers.Settings{CloudCServiceAccountJSON: []byte(`{}`), CloudCBatchGCSURI: "gs://b"}, true},
		{providers.Settings{APIKey: "ya29.t"}, false},
		{providers.Settings{APIKey: "ya29.t", CloudCBatchGCSURI: "s3://b"}, false},
		{providers.Settings{CloudCBatchGCSURI: "gs://b"}, false},
	} {
		if got := p.BatchReady(&tc.s); got != tc.ready {
			t.Fatalf("BatchReady(%+v) = %v", tc.s, got)
		}
	}
}
