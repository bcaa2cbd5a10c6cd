package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestHardening3CacheKeysMutatedBody: the response cache keys the body a
// target is actually sent. A before-request mutator (addPrefix) changes
// it, so answers are never swapped between requests with and without the
// mutator, in either order; a repeated mutated request still hits.
func TestHardening3CacheKeysMutatedBody(t *testing.T) {
	up := newFakeOpenAI(t)
	// The answer echoes the user's message as the provider saw it.
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		content := gjson.GetBytes(body, "messages.0.content").String()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, "saw: "+content)
		return true
	}
	loadFresh(t, site{Gateway: "custom_host_allow loopback\ncache_size 16MB"})
	const hook = `"before_request_hooks":[{"id":"m","type":"mutator","checks":[{"id":"default.addPrefix","parameters":{"prefix":"Be brief. "}}]}]`
	plain := target(up, `"cache":{"mode":"simple","max_age":600}`)
	mutated := target(up, `"cache":{"mode":"simple","max_age":600},`+hook)
	type step struct {
		config, status, saw string
	}
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"plain first", []step{
			{plain, "MISS", "saw: hi"},
			{mutated, "MISS", "saw: Be brief. hi"},
			{mutated, "HIT", "saw: Be brief. hi"},
			{plain, "HIT", "saw: hi"},
		}},
		{"mutated first", []step{
			{mutated, "MISS", "saw: Be brief. hi"},
			{plain, "MISS", "saw: hi"},
			{plain, "HIT", "saw: hi"},
			{mutated, "HIT", "saw: Be brief. hi"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A namespace per case, so the cases share no entries.
			ns := strings.ReplaceAll(tt.name, " ", "-")
			for i, st := range tt.steps {
				resp, raw := chat(t, st.config, "x-gateway-cache-namespace", ns)
				if resp.StatusCode != 200 {
					t.Fatalf("step %d: status %d: %s", i, resp.StatusCode, raw)
				}
				got := gjson.GetBytes(raw, "choices.0.message.content").String()
				if cs := resp.Header.Get("x-gateway-cache-status"); cs != st.status || got != st.saw {
					t.Fatalf("step %d: cache status %s answer %q, want %s %q", i, cs, got, st.status, st.saw)
				}
			}
		})
	}
}
