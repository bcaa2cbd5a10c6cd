package integration

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// costStreamHook streams a chat answer whose usage (1000 prompt tokens,
// 800 of them cached, 500 completion tokens, 400 of them reasoning) costs
// $0.00264 on o4-mini.
func costStreamHook(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.URL.Path != "/v1/chat/completions" || !strings.Contains(string(body), `"stream":true`) {
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"o4-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`+"\n\n")
	io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"o4-mini","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":800},"completion_tokens_details":{"reasoning_tokens":400}}}`+"\n\n")
	io.WriteString(w, "data: [DONE]\n\n")
	return true
}

// TestCostPolicyCluster runs a spend limit over two gateways sharing one
// Redis: $0.01 per hour. Each request (a short prompt, no max_tokens)
// reserves its prompt and the default output (ratelimit.DefaultOutputTokens,
// 1,024 tokens at o4-mini's output price: about 4,540 µ$) at admission and
// is settled to its reported cost, $0.00264 (2,640 µ$), so requests
// alternating between the instances are admitted three times (7,920 µ$
// spent) and the fourth, whose reservation no longer fits, is refused on
// either instance: the budget is never passed. Reserving the prompt alone
// admitted a fourth (10,560 µ$ spent). A chunked answer ends only after
// the settlement ran, so each request sees the previous one settled.
func TestCostPolicyCluster(t *testing.T) {
	requireRedis(t)
	bin := buildGateway(t)
	up := newFakeOpenAI(t)
	up.Hook = costStreamHook

	port2 := freePort()
	dir := t.TempDir()
	second := rlSite{Redis: redisBlock(false), Storage: filepath.Join(dir, "storage"),
		HTTPPort: port2, AdminPort: freePort(), Log: filepath.Join(dir, "second.log")}
	startGateway(t, bin, dir, second.caddyfile(), port2)
	base2 := fmt.Sprintf("http://127.0.0.1:%d/v1", port2)
	loadRL(t, rlSite{Redis: redisBlock(false)})

	run := uuid.NewString()
	createPolicy(t, gatewayKey, `{"type":"cost","unit":"rph","value":0.01,"name":"spend",`+
		`"conditions":[{"key":"metadata.run","value":"*"}],"group_by":[{"key":"metadata.run"}]}`)

	body := `{"model":"o4-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	bases := []string{gatewayURL(), base2}
	for i, want := range []int{200, 200, 200, 429, 429} {
		resp, raw := rlChat(t, bases[i%2], gatewayKey, up.URL, body, "x-gateway-metadata", `{"run":"`+run+`"}`)
		if resp.StatusCode != want {
			t.Fatalf("request %d on instance %d: %d, want %d: %s", i+1, i%2+1, resp.StatusCode, want, raw)
		}
		if want == 200 && !strings.Contains(string(raw), "[DONE]") {
			t.Fatalf("request %d: incomplete stream %s", i+1, raw)
		}
		if want == 429 && !strings.Contains(string(raw), "US$0.01 per hour") {
			t.Fatalf("429 message %s", raw)
		}
	}
	// Another group has its own budget.
	if resp, raw := rlChat(t, base2, gatewayKey, up.URL, body, "x-gateway-metadata", `{"run":"other-`+run+`"}`); resp.StatusCode != 200 {
		t.Fatalf("other group: %d %s", resp.StatusCode, raw)
	}
}

// TestCostPolicyReservation: a request whose estimate (max_tokens at the
// output price) exceeds what is left of the budget is refused at
// admission, before reaching the provider, while a small one still fits.
func TestCostPolicyReservation(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = costStreamHook
	loadRL(t, rlSite{})
	run := uuid.NewString()
	// default_reservation: a request without max_tokens reserves 500
	// output tokens (2,200 µ$ and its prompt) on this policy.
	createPolicy(t, gatewayKey, `{"type":"cost","unit":"rph","value":0.005,"default_reservation":500,`+
		`"conditions":[{"key":"metadata.run","value":"*"}],"group_by":[{"key":"metadata.run"}]}`)
	meta := []string{"x-gateway-metadata", `{"run":"` + run + `"}`}
	small := `{"model":"o4-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, small, meta...); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, raw)
	}
	// 2,640 µ$ spent of 5,000. max_tokens 1000 reserves 1000 × 4.4e-6 =
	// 4,400 µ$ (plus the prompt): more than the 2,360 left.
	before := up.count()
	big := `{"model":"o4-mini","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, big, meta...); resp.StatusCode != 429 {
		t.Fatalf("big: %d %s", resp.StatusCode, raw)
	}
	if up.count() != before {
		t.Fatal("a refused request reached the provider")
	}
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, small, meta...); resp.StatusCode != 200 {
		t.Fatalf("small after big: %d %s", resp.StatusCode, raw)
	}
}
