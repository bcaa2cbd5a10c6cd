package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestUnservedControlPlaneNotForwarded sends the Portkey SDK's
// control-plane calls with a provider, its key and a custom host: each
// gets an error envelope from the gateway (404 for the APIs it does not
// serve) and none reaches the provider.
func TestUnservedControlPlaneNotForwarded(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		// Served by the keys API (docs/keys.md): answered by the gateway.
		{"POST", "virtual-keys", 400},
		{"PUT", "configs/pc-1", 404},
		{"DELETE", "api-keys/k-1", 404},
		{"POST", "logs", 404},
		{"POST", "logs/exports", 404},
		{"GET", "analytics/graphs/requests", 404},
		{"GET", "admin/users", 404},
		{"POST", "admin/workspaces", 404},
		{"GET", "feedback", 405},
		{"GET", "guardrails", 404},
		{"GET", "integrations", 404},
		{"GET", "mcp-servers", 404},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var httpResp *http.Response
			err := client.Execute(context.Background(), tc.method, tc.path, map[string]any{"name": "x"}, nil, option.WithResponseInto(&httpResp))
			var apiErr *openai.Error
			if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != tc.status {
				t.Fatalf("want a %d API error, got %v", tc.status, err)
			}
			if httpResp.Header.Get("x-gateway-error") != "true" {
				t.Fatal("404 not from the gateway")
			}
			if tc.status == 404 && apiErr.Type != "not_found_error" {
				t.Fatalf("type %q", apiErr.Type)
			}
		})
	}
	if n := up.count(); n != 0 {
		t.Fatalf("%d control-plane calls reached the provider", n)
	}
	// Inference paths still reach it.
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	if up.count() != 1 {
		t.Fatal("chat did not reach the provider")
	}
}

// TestFeedbackAcceptedAndLogged posts feedback as the Portkey SDKs do and
// checks the answer and the log line joined by trace id.
func TestFeedbackAcceptedAndLogged(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	body := []byte(`{"trace_id":"trace-feedback-1","value":-7,"weight":0.25,"metadata":{"_user":"u-1","comment":"secret-comment-text"}}`)
	resp, raw := do(t, "POST", "/feedback", body, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-feedback-provider")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Status      string   `json:"status"`
		Message     string   `json:"message"`
		FeedbackIDs []string `json:"feedback_ids"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Status != "success" || len(out.FeedbackIDs) != 1 {
		t.Fatalf("answer %s", raw)
	}
	if up.count() != 0 {
		t.Fatal("feedback reached the provider")
	}
	var line string
	for _, l := range strings.Split(readLog(t), "\n") {
		if strings.Contains(l, `"logger":"llm.feedback"`) {
			line = l
		}
	}
	var entry struct {
		TraceID      string   `json:"trace_id"`
		FeedbackID   string   `json:"feedback_id"`
		Value        int      `json:"value"`
		Weight       float64  `json:"weight"`
		MetadataKeys []string `json:"metadata_keys"`
		KeyName      string   `json:"key_name"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("no feedback log line: %v\n%s", err, readLog(t))
	}
	if entry.TraceID != "trace-feedback-1" || entry.Value != -7 || entry.Weight != 0.25 || entry.FeedbackID != out.FeedbackIDs[0] ||
		strings.Join(entry.MetadataKeys, ",") != "_user,comment" || entry.KeyName != "test" {
		t.Fatalf("log line %s", line)
	}
	for _, s := range []string{"secret-comment-text", "sk-feedback-provider", gatewayKey} {
		if strings.Contains(line, s) {
			t.Fatalf("feedback log holds %q: %s", s, line)
		}
	}

	// Validation names the field.
	for _, tc := range []struct{ body, param string }{
		{`{"value":1}`, "trace_id"},
		{`{"trace_id":"t","value":20}`, "value"},
		{`{"trace_id":"t","value":1,"weight":2}`, "weight"},
		{`{"trace_id":"t","value":1,"metadata":[1]}`, "metadata"},
	} {
		resp, raw := do(t, "POST", "/feedback", []byte(tc.body))
		assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 400, "invalid_request_error")
		var env struct{ Error struct{ Param string } }
		_ = json.Unmarshal(raw, &env)
		if env.Error.Param != tc.param {
			t.Fatalf("%s: param %q, want %q", tc.body, env.Error.Param, tc.param)
		}
	}
}
