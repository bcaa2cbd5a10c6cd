package integration

import (
	"testing"
)

// TestRetriesSkipFinalErrorClasses: a retry is made only when the same
// call can succeed on retry. A spent quota (OpenAI's insufficient_quota
// comes as a 429), a prompt too long, a refused prompt and a malformed
// request are answered after one upstream call even though their status
// is listed in retry.on_status_codes; a rate limit and an overload are
// retried.
func TestRetriesSkipFinalErrorClasses(t *testing.T) {
	up := newScripted(t)
	loadFresh(t, site{})
	file := func(name string) string { return string(fixture(t, "openaicompat", "errors/"+name)) }
	tests := []struct {
		name   string
		status int
		body   string
		hits   int
		class  string
	}{
		{"quota exhausted", 429, file("openai_insufficient_quota.json"), 1, "quota_exhausted"},
		{"context length", 400, file("openai_context_length.json"), 1, "context_length_exceeded"},
		{"content policy", 400, file("openai_content_policy.json"), 1, "content_policy"},
		{"invalid request", 400, file("openai_invalid_value.json"), 1, "invalid_request"},
		{"rate limited", 429, file("openai_rate_limit.json"), 3, "rate_limited"},
		{"overloaded", 503, file("openai_overloaded.json"), 3, "overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(reply{status: tt.status, body: tt.body})
			before := up.count()
			cfg := target(up.fakeOpenAI, `"retry":{"attempts":2,"on_status_codes":[400,429,503]}`)
			resp, raw := chat(t, cfg)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			if hits := up.count() - before; hits != tt.hits {
				t.Fatalf("%d upstream calls, want %d", hits, tt.hits)
			}
			wantHeaders(t, resp, "x-gateway-error-type", tt.class)
		})
	}
}
