package integration

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// hardening3ContentTypes are Content-Types a client may put on a JSON
// body that the gateway still serves as JSON: before the fix,
// llm_ratelimit did not read such a body, so no model policy matched and
// no cost was reserved.
var hardening3ContentTypes = []string{
	"text/plain",
	"application/x-www-form-urlencoded", // curl -d
	"text/plain; charset=utf-8",
}

// TestHardening3RateLimitModelPolicyContentType sends a JSON chat under
// each Content-Type against a policy of 2 requests an hour on the model:
// the third is refused, and the provider saw only two.
func TestHardening3RateLimitModelPolicyContentType(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for _, ct := range hardening3ContentTypes {
		t.Run(ct, func(t *testing.T) {
			run := uuid.NewString()
			createPolicy(t, gatewayKey, `{"type":"requests","unit":"rph","value":2,"name":"per model",`+
				`"conditions":[{"key":"model","value":"gpt-4o"},{"key":"metadata.run","value":"`+run+`"}],"group_by":[{"key":"metadata.run"}]}`)
			before := up.count()
			for i, want := range []int{200, 200, 429} {
				resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body,
					"Content-Type", ct, "x-gateway-metadata", `{"run":"`+run+`"}`)
				if resp.StatusCode != want {
					t.Fatalf("request %d: %d, want %d: %s", i+1, resp.StatusCode, want, raw)
				}
				if want == 429 && !strings.Contains(string(raw), `policy \"per model\"`) {
					t.Fatalf("429 does not name the policy: %s", raw)
				}
			}
			if n := up.count() - before; n != 2 {
				t.Fatalf("the provider saw %d requests, want 2", n)
			}
		})
	}
}

// TestHardening3RateLimitCostBudgetContentType sends 20 concurrent
// streamed chats (max_tokens 500 on o4-mini: each reserves about 2,234
// µ$ and costs 2,640 µ$, costStreamHook) under each Content-Type against
// a US$0.01 an hour budget. The provider holds every answer until each
// request has either reached it or been refused, so no settlement can
// help: only the reservations bound the spend, to 4 requests
// (4 × 2,234 ≤ 10,000 < 5 × 2,234). Before the fix the body was not read,
// each request reserved nothing and all 20 reached the provider
// (US$0.0528 against the US$0.01 budget).
func TestHardening3RateLimitCostBudgetContentType(t *testing.T) {
	const n = 20
	up := newFakeOpenAI(t)
	var arrived atomic.Int32
	var release atomic.Pointer[chan struct{}]
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		arrived.Add(1)
		<-*release.Load()
		return costStreamHook(w, r, body)
	}
	loadRL(t, rlSite{})
	body := `{"model":"o4-mini","stream":true,"max_tokens":500,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	for _, ct := range hardening3ContentTypes {
		t.Run(ct, func(t *testing.T) {
			run := uuid.NewString()
			createPolicy(t, gatewayKey, `{"type":"cost","unit":"rph","value":0.01,"name":"budget",`+
				`"conditions":[{"key":"metadata.budget","value":"`+run+`"}],"group_by":[{"key":"metadata.budget"}]}`)
			arrived.Store(0)
			gate := make(chan struct{})
			release.Store(&gate)
			var refused atomic.Int32
			codes, bodies := make([]int, n), make([]string, n)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body,
						"Content-Type", ct, "x-gateway-metadata", `{"budget":"`+run+`"}`)
					codes[i], bodies[i] = resp.StatusCode, string(raw)
					if resp.StatusCode != 200 {
						refused.Add(1)
					}
				}(i)
			}
			// Every request is decided before any answer (and so any
			// settlement) is let go.
			for arrived.Load()+refused.Load() < n {
				time.Sleep(time.Millisecond)
			}
			close(gate)
			wg.Wait()
			admitted := 0
			for i, code := range codes {
				switch code {
				case 200:
					if !strings.Contains(bodies[i], "[DONE]") {
						t.Fatalf("incomplete stream %s", bodies[i])
					}
					admitted++
				case 429:
					if !strings.Contains(bodies[i], "US$0.01 per hour") {
						t.Fatalf("429 message %s", bodies[i])
					}
				default:
					t.Fatalf("status %d: %s", code, bodies[i])
				}
			}
			reached := int(arrived.Load())
			t.Logf("%s: %d of %d admitted, %d reached the provider (US$%.5f spent of US$0.01)", ct, admitted, n, reached, float64(reached)*0.00264)
			if admitted != 4 || reached != 4 {
				t.Fatalf("%d admitted, %d reached the provider; want 4 and 4", admitted, reached)
			}
		})
	}
}
