package bedrock

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

const testJobArn = "arn:aws:bedrock:us-west-2:123456789012:model-invocation-job/abcdef123456"

func TestBatchRecordIDs(t *testing.T) {
	for _, tc := range []struct {
		id, record string
		bad        bool
	}{
		{id: "gw-0", record: "GW000000000"},
		{id: "gw-12", record: "GW000000012"},
		{id: "gw-999999999", record: "GW999999999"},
		{id: "gw-1000000000", bad: true},
		{id: "gw--1", bad: true},
		{id: "custom", bad: true},
	} {
		got, err := recordID(tc.id)
		if (err != nil) != tc.bad || got != tc.record {
			t.Fatalf("recordID(%q) = %q, %v", tc.id, got, err)
		}
		if !tc.bad && lineID(got) != tc.id {
			t.Fatalf("lineID(%q) = %q, want %q", got, lineID(got), tc.id)
		}
	}
	for _, r := range []string{"", "GW12", "GW00000001x", "XX000000001", "GW-00000001"} {
		if lineID(r) != "" {
			t.Fatalf("lineID(%q) = %q, want none", r, lineID(r))
		}
	}
}

func TestBatchParseResult(t *testing.T) {
	for _, tc := range []struct {
		name, line, kind string
		status           int
		msg              string
		bad              bool
	}{
		{name: "answer", line: `{"recordId":"GW000000003","modelInput":{},"modelOutput":{"output":{}}}`, kind: providers.BatchSucceeded, status: 200},
		{name: "error", line: `{"recordId":"GW000000003","modelInput":{},"error":{"errorCode":400,"errorMessage":"bad request"}}`, kind: providers.BatchErrored, status: 400, msg: "bad request"},
		{name: "throttled", line: `{"recordId":"GW000000003","error":{"errorCode":429,"errorMessage":"slow down"}}`, kind: providers.BatchErrored, status: 429, msg: "slow down"},
		{name: "code out of range", line: `{"recordId":"GW000000003","error":{"errorCode":7}}`, kind: providers.BatchErrored, status: 500, msg: "without details"},
		{name: "no error, no output", line: `{"recordId":"GW000000003"}`, kind: providers.BatchErrored, status: 500},
		{name: "foreign record id", line: `{"recordId":"CALL0000001","modelOutput":{}}`, bad: true},
		{name: "record id twice", line: `{"recordId":"GW000000003","recordId":"GW000000004","modelOutput":{}}`, bad: true},
		{name: "not JSON", line: `{"recordId":`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New().ParseBatchResult([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", r)
				}
				return
			}
			if err != nil || r.ID != "gw-3" || r.Kind != tc.kind || r.Status != tc.status || !strings.Contains(gjson.GetBytes(r.Body, "message").Str, tc.msg) {
				t.Fatalf("%+v (%s), %v", r, r.Body, err)
			}
		})
	}
}

func TestBatchParseJob(t *testing.T) {
	job := func(status string, extra string) string {
		return `{"jobArn":"` + testJobArn + `","status":"` + status + `","totalRecordCount":10,"processedRecordCount":4,"successRecordCount":3,"errorRecordCount":1` + extra + `}`
	}
	for _, tc := range []struct {
		name, body         string
		ended, window, bad bool
		failure            string
	}{
		{name: "running", body: job("InProgress", "")},
		{name: "stopping", body: job("Stopping", "")},
		{name: "completed", body: job("Completed", ""), ended: true},
		{name: "partly", body: job("PartiallyCompleted", ""), ended: true},
		{name: "stopped", body: job("Stopped", ""), ended: true},
		{name: "expired", body: job("Expired", ""), ended: true, window: true},
		{name: "failed", body: job("Failed", `,"message":"too few records"`), ended: true, failure: "too few records"},
		{name: "unknown status", body: job("Exploded", ""), bad: true},
		{name: "another job", body: strings.Replace(job("Completed", ""), "abcdef123456", "zzzzzz999999", 1), bad: true},
		{name: "status twice", body: job("InProgress", `,"status":"Completed"`), bad: true},
		{name: "negative count", body: strings.Replace(job("Completed", ""), `"errorRecordCount":1`, `"errorRecordCount":-1`, 1), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := parseJob([]byte(tc.body), testJobArn)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", j)
				}
				return
			}
			if err != nil || j.Ended != tc.ended || j.WindowEnded != tc.window || !strings.Contains(j.Failure, tc.failure) || (tc.failure == "") != (j.Failure == "") ||
				j.Succeeded != 3 || j.Errored != 1 || j.Processing != 6 {
				t.Fatalf("%+v, %v", j, err)
			}
		})
	}
}

func TestBatchReady(t *testing.T) {
	ready := providers.Settings{CloudAAccessKeyID: "AKID", CloudASecretAccessKey: "s", CloudABatchS3URI: "s3://b/p", CloudABatchRoleARN: "arn:aws:iam::1:role/r"}
	for _, tc := range []struct {
		name  string
		edit  func(*providers.Settings)
		ready bool
	}{
		{name: "ready", edit: func(*providers.Settings) {}, ready: true},
		{name: "bucket only", edit: func(s *providers.Settings) { s.CloudABatchS3URI = "s3://b" }, ready: true},
		{name: "no location", edit: func(s *providers.Settings) { s.CloudABatchS3URI = "" }},
		{name: "not s3", edit: func(s *providers.Settings) { s.CloudABatchS3URI = "https://b/p" }},
		{name: "no bucket", edit: func(s *providers.Settings) { s.CloudABatchS3URI = "s3:///p" }},
		{name: "no role", edit: func(s *providers.Settings) { s.CloudABatchRoleARN = "" }},
		{name: "API key only", edit: func(s *providers.Settings) { s.CloudAAccessKeyID, s.CloudASecretAccessKey, s.APIKey = "", "", "k" }},
	} {
		s := ready
		tc.edit(&s)
		if got := New().BatchReady(&s); got != tc.ready {
			t.Fatalf("%s: BatchReady = %v", tc.name, got)
		}
	}
	if _, prefix, _ := batchLocation(&providers.Settings{CloudABatchS3URI: "s3://b//deep/p/"}); folder(prefix, "batch_gw1/..") != "deep/p/batch-gw1/" {
		t.Fatalf("folder %q", folder(prefix, "batch_gw1/.."))
	}
}
