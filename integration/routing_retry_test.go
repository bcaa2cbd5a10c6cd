package integration

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/option"
)

func TestRetries(t *testing.T) {
	up := newScripted(t)
	loadFresh(t, site{})
	tests := []struct {
		name     string
		retry    string
		script   []reply
		status   int
		hits     int
		count    string
		attempts string
	}{
		{"until success", `{"attempts":3}`, []reply{{status: 503}, {status: 500}, {}}, 200, 3, "2",
			"config:retry:503 config:retry:500 config:ok:200"},
		{"exhausted", `{"attempts":2}`, []reply{{status: 503}}, 503, 3, "2",
			"config:retry:503 config:retry:503 config:error:503"},
		{"unlisted status", `{"attempts":2}`, []reply{{status: 400}}, 400, 1, "0", "config:error:400"},
		{"listed status", `{"attempts":2,"on_status_codes":[409]}`, []reply{{status: 409}, {}}, 200, 2, "1",
			"config:retry:409 config:ok:200"},
		{"retry-after-ms honoured", `{"attempts":1,"use_retry_after_headers":true}`,
			[]reply{{status: 429, headers: map[string]string{"retry-after-ms": "50"}}, {}}, 200, 2, "1",
			"config:retry:429 config:ok:200"},
		{"retry-after beyond the budget", `{"attempts":3,"use_retry_after_header":true}`,
			[]reply{{status: 429, headers: map[string]string{"retry-after": "120"}}}, 429, 1, "0",
			"config:retry_after_exceeds_budget:429"},
		{"timeouts are retried", `{"attempts":1,"on_status_codes":[429]}`, []reply{{hang: true}, {}}, 200, 2, "1",
			"config:timeout:408 config:ok:200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(tt.script...)
			before := up.count()
			cfg := target(up.fakeOpenAI, `"request_timeout":200,"retry":`+tt.retry)
			resp, raw := chat(t, cfg)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if hits := up.count() - before; hits != tt.hits {
				t.Fatalf("%d upstream calls, want %d", hits, tt.hits)
			}
			wantHeaders(t, resp, "x-gateway-retry-attempt-count", tt.count, "x-gateway-last-used-option-index", "config")
			if got := lastAttempts(t); got != tt.attempts {
				t.Fatalf("attempts %s, want %s", got, tt.attempts)
			}
		})
	}
}

// TestRetriesWithOpenAIClient: the SDK sees one successful answer and the
// retry count header, though the provider failed twice.
func TestRetriesWithOpenAIClient(t *testing.T) {
	up := newScripted(t, reply{status: 502}, reply{status: 429, headers: map[string]string{"x-ms-retry-after-ms": "20"}}, reply{})
	loadFresh(t, site{})
	cfg := compactJSON(t, target(up.fakeOpenAI, `"retry":{"attempts":2,"use_retry_after_headers":true}`))
	client := newClient("x-gateway-config", cfg)
	var httpResp *http.Response
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello!" || up.count() != 3 {
		t.Fatalf("content %q after %d calls", resp.Choices[0].Message.Content, up.count())
	}
	wantHeaders(t, httpResp, "x-gateway-retry-attempt-count", "2")
}
