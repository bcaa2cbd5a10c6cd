package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// TestRateLimitPerKey checks a requests policy grouped by api_key: each
// gateway key has its own counter, the headers count down on every
// response, the 429 is OpenAI's, and archiving the policy lifts it.
func TestRateLimitPerKey(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{})
	id := createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":2,"name":"two a minute","conditions":[{"key":"workspace_id","value":"`+rlWS+`"}],"group_by":[{"key":"api_key"}]}`)

	for _, key := range []string{gatewayKey, rlSecondKey} {
		for i, want := range []string{"1", "0"} {
			resp, raw := rlChat(t, gatewayURL(), key, up.URL, "")
			h := resp.Header
			if resp.StatusCode != 200 || h.Get("x-ratelimit-limit-requests") != "2" || h.Get("x-ratelimit-remaining-requests") != want {
				t.Fatalf("key %s request %d: %d %v %s", key[:6], i, resp.StatusCode, h, raw)
			}
			if r := h.Get("x-ratelimit-reset-requests"); !strings.HasSuffix(r, "s") || h.Get("x-ratelimit-limit-tokens") != "" {
				t.Fatalf("reset %q, tokens headers %v", r, h)
			}
			if h.Get("x-gateway-trace-id") == "" {
				t.Fatal("the gateway's own headers are missing")
			}
		}
		resp, raw := rlChat(t, gatewayURL(), key, up.URL, "")
		h := resp.Header
		if resp.StatusCode != 429 || h.Get("x-gateway-error") != "true" || h.Get("x-ratelimit-remaining-requests") != "0" {
			t.Fatalf("third request: %d %v %s", resp.StatusCode, h, raw)
		}
		var env struct {
			Error struct{ Type, Code, Message string }
		}
		_ = json.Unmarshal(raw, &env)
		if env.Error.Type != "rate_limit_exceeded" || !strings.Contains(env.Error.Message, `"two a minute"`) {
			t.Fatalf("429 body %s", raw)
		}
		secs, _ := strconv.Atoi(h.Get("Retry-After"))
		ms, _ := strconv.Atoi(h.Get("retry-after-ms"))
		if secs < 1 || secs > 61 || ms < 1 || (ms+999)/1000 != secs {
			t.Fatalf("Retry-After %q retry-after-ms %q", h.Get("Retry-After"), h.Get("retry-after-ms"))
		}
	}
	if up.count() != 4 {
		t.Fatalf("the provider saw %d requests, want 4", up.count())
	}
	// An unknown key is the gateway's 401, not a 429.
	if resp, _ := rlChat(t, gatewayURL(), "nope", up.URL, ""); resp.StatusCode != 401 {
		t.Fatalf("unauthenticated: %d", resp.StatusCode)
	}
	// A key of another workspace is not limited.
	if resp, _ := rlChat(t, gatewayURL(), rlOtherKey, up.URL, ""); resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "" {
		t.Fatalf("other workspace: %d %v", resp.StatusCode, resp.Header)
	}

	// Raising the limit applies to the next request.
	if status, _ := api(t, gatewayKey, http.MethodPut, "/policies/rate-limits/"+id, `{"value":3}`); status != 200 {
		t.Fatal("update failed")
	}
	if resp, _ := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "3" {
		t.Fatalf("after raising the limit: %d %v", resp.StatusCode, resp.Header)
	}
	// Archiving stops enforcement at once on this instance.
	if status, _ := api(t, gatewayKey, http.MethodDelete, "/policies/rate-limits/"+id, ""); status != 200 {
		t.Fatal("archive failed")
	}
	if resp, _ := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "" {
		t.Fatalf("after archiving: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestRateLimitTokensStream checks a token policy: the reservation at
// admission, settlement to the usage a streamed answer reported, and a 429
// once the budget is spent.
func TestRateLimitTokensStream(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{})
	createPolicy(t, gatewayKey, `{"type":"tokens","unit":"rph","value":1000,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)

	body := `{"model":"gpt-4o-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	reserve := (len(body)+3)/4 + 100
	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "data: [DONE]") {
		t.Fatalf("stream: %d %s", resp.StatusCode, raw)
	}
	if got := resp.Header.Get("x-ratelimit-remaining-tokens"); got != strconv.Itoa(1000-reserve) || resp.Header.Get("x-ratelimit-limit-tokens") != "1000" {
		t.Fatalf("remaining-tokens at admission %q, want %d", got, 1000-reserve)
	}
	if resp.Header.Get("x-ratelimit-reset-tokens") == "" || resp.Header.Get("x-ratelimit-limit-requests") != "" {
		t.Fatalf("headers %v", resp.Header)
	}
	// The fake provider reported 9 prompt + 3 completion tokens in the
	// stream; a chunked answer ends only after the handler (and so the
	// settlement) returned, so the next request sees the settled count.
	// A body-less request reserves nothing and reports what is left.
	resp, _ = rawDo(t, gatewayURL(), http.MethodGet, "/models", nil, "x-gateway-api-key", gatewayKey,
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if got := resp.Header.Get("x-ratelimit-remaining-tokens"); got != "988" {
		t.Fatalf("after settling the stream: remaining-tokens %q, want 988", got)
	}
}

// TestRateLimitTokensExhausted checks that a token budget refuses once
// spent, with the tokens headers on the 429.
func TestRateLimitTokensExhausted(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{})
	createPolicy(t, gatewayKey, `{"type":"tokens","unit":"rpm","value":20,"name":"tiny","conditions":[{"key":"api_key","value":"test"}],"group_by":[{"key":"api_key"}]}`)
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 200) + `"}]}`
	// The estimate (~60 tokens) is above the limit: capped at 20, so the
	// first request runs, and is then charged its 12 reported tokens.
	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
	if resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-remaining-tokens") != "0" {
		t.Fatalf("first: %d %v %s", resp.StatusCode, resp.Header, raw)
	}
	resp, raw = rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
	if resp.StatusCode != 429 || resp.Header.Get("x-ratelimit-limit-tokens") != "20" || resp.Header.Get("x-ratelimit-remaining-tokens") != "8" {
		t.Fatalf("second: %d %v %s", resp.StatusCode, resp.Header, raw)
	}
	if !strings.Contains(string(raw), `policy \"tiny\"`) || !strings.Contains(string(raw), "20 tokens per minute") {
		t.Fatalf("429 message %s", raw)
	}
}

// TestRateLimitCaddyfilePolicy checks a policy declared in the Caddyfile
// on the model (which needs the body, shared with the gateway) with a day
// window, whose 429 tells SDKs not to retry.
func TestRateLimitCaddyfilePolicy(t *testing.T) {
	up := newFakeOpenAI(t)
	name := "daily-" + uuid.NewString() // counters are per process: unique per run
	loadRL(t, rlSite{Limit: fmt.Sprintf(`
			policy %s {
				type requests
				unit rpd
				value 1
				condition model gpt-4o
				group_by api_key model
			}`, name)})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`
	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
	if resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("first: %d %v %s", resp.StatusCode, resp.Header, raw)
	}
	var sent struct{ Model string }
	if err := json.Unmarshal(up.last().Body, &sent); err != nil || sent.Model != "gpt-4o" {
		t.Fatalf("the provider got %s", up.last().Body)
	}
	resp, raw = rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
	if resp.StatusCode != 429 || resp.Header.Get("x-should-retry") != "false" {
		t.Fatalf("second: %d %v %s", resp.StatusCode, resp.Header, raw)
	}
	if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); secs < 3600 {
		t.Fatalf("Retry-After %q for a day window", resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(raw), name) {
		t.Fatalf("429 does not name the policy: %s", raw)
	}
	// Another model, or another key, is not limited by it.
	if resp, _ := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "" {
		t.Fatalf("other model: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := rlChat(t, gatewayURL(), rlOtherKey, up.URL, body); resp.StatusCode != 200 {
		t.Fatalf("other key: %d", resp.StatusCode)
	}
}

// TestRateLimitRouteWithoutDirective checks that policies are enforced
// only where llm_ratelimit is.
func TestRateLimitRouteWithoutDirective(t *testing.T) {
	up := newFakeOpenAI(t)
	dir := storageDir(t)
	loadRL(t, rlSite{Storage: dir})
	createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":1,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
	loadRL(t, rlSite{Storage: dir, NoLimiter: true})
	for i := 0; i < 3; i++ {
		if resp, _ := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "" {
			t.Fatalf("request %d: %d %v", i, resp.StatusCode, resp.Header)
		}
	}
}

// fire sends n concurrent chat requests, all released at once, through
// the gateways in bases (round robin), and returns their status codes and
// bodies.
func fire(t *testing.T, bases []string, upURL string, n int, headers ...string) ([]int, []string) {
	t.Helper()
	codes, bodies := make([]int, n), make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			resp, raw := rlChat(t, bases[i%len(bases)], gatewayKey, upURL, "", headers...)
			codes[i], bodies[i] = resp.StatusCode, string(raw)
		}(i)
	}
	close(start)
	wg.Wait()
	return codes, bodies
}

// TestRateLimitConcurrent checks that N parallel requests against a limit
// of K admit exactly K, with the in-process limiter and with Redis.
func TestRateLimitConcurrent(t *testing.T) {
	const n, k = 200, 37
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			s := rlSite{}
			if backend == "redis" {
				requireRedis(t)
				s.Redis = redisBlock(false)
			}
			up := newFakeOpenAI(t)
			loadRL(t, s)
			createPolicy(t, gatewayKey, fmt.Sprintf(`{"type":"requests","unit":"rph","value":%d,"conditions":[{"key":"api_key","value":"test"}],"group_by":[{"key":"api_key"}]}`, k))
			codes, _ := fire(t, []string{gatewayURL()}, up.URL, n)
			got := countStatuses(codes)
			if got[200] != k || got[429] != n-k {
				t.Fatalf("%d parallel requests against a limit of %d: %v", n, k, got)
			}
			if up.count() != k {
				t.Fatalf("the provider saw %d requests, want %d", up.count(), k)
			}
		})
	}
}

// TestRateLimitRedisUnreachable checks both fail modes against a Redis
// that refuses connections: closed answers 503, open admits without
// limiting; the failure is logged once, not once per request.
func TestRateLimitRedisUnreachable(t *testing.T) {
	up := newFakeOpenAI(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort()) // nothing listens there
	limit := `
			policy always-` + uuid.NewString() + ` {
				type requests
				unit rpm
				value 100
			}`
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail_open=%v", open), func(t *testing.T) {
			mode := "fail_closed"
			if open {
				mode = "fail_open"
			}
			loadRL(t, rlSite{Limit: limit, Redis: "redis " + addr + " {\n\t\t\t" + mode + "\n\t\t}"})
			for i := 0; i < 3; i++ {
				resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
				if open && (resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "") {
					t.Fatalf("fail open: %d %v %s", resp.StatusCode, resp.Header, raw)
				}
				if !open && (resp.StatusCode != 503 || !strings.Contains(string(raw), `"type":"service_unavailable"`) ||
					!strings.Contains(string(raw), "rate limiter is unavailable")) {
					t.Fatalf("fail closed: %d %s", resp.StatusCode, raw)
				}
			}
			// The API cannot reach its store either.
			if status, m := api(t, gatewayKey, http.MethodPost, "/policies/rate-limits", validPolicy); status != 503 {
				t.Fatalf("create without a store: %d %v", status, m)
			}
			log := readLog(t)
			if strings.Contains(log, gatewayKey) {
				t.Fatal("the gateway key reached the log")
			}
			lines := 0
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, `"logger":"http.handlers.llm_ratelimit"`) && strings.Contains(l, "unavailable") {
					lines++
				}
			}
			if lines != 1 {
				t.Fatalf("%d limiter failure lines for 3 requests, want 1 (rate-limited logging)\n%s", lines, log)
			}
		})
	}
}

// TestRateLimitHeadersOverProvider checks that the gateway's x-ratelimit-*
// headers win over a provider's of the same name, on JSON and streamed
// answers, and that streams still flush event by event through the
// limiter.
func TestRateLimitHeadersOverProvider(t *testing.T) {
	up := newFakeOpenAI(t)
	gate := make(chan struct{})
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		w.Header().Set("X-Ratelimit-Limit-Requests", "5000")
		w.Header().Set("X-Ratelimit-Limit-Tokens", "90000")
		if strings.Contains(string(body), `"stream":true`) {
			writeChatStream(w, "m", []string{"a", "b"}, true, gate)
			return true
		}
		return false
	}
	loadRL(t, rlSite{})
	createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":7,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)

	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
	if resp.StatusCode != 200 || strings.Join(resp.Header.Values("X-Ratelimit-Limit-Requests"), ",") != "7" ||
		resp.Header.Get("X-Ratelimit-Limit-Tokens") != "90000" {
		t.Fatalf("JSON answer: %d %v %s", resp.StatusCode, resp.Header, raw)
	}

	req, _ := http.NewRequest(http.MethodPost, gatewayURL()+"/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	for k, v := range map[string]string{"x-gateway-api-key": gatewayKey, "x-gateway-provider": "openai", "x-gateway-custom-host": up.URL,
		"Authorization": "Bearer sk-test-provider", "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	sresp, err := rlClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	if got := strings.Join(sresp.Header.Values("X-Ratelimit-Limit-Requests"), ","); got != "7" || sresp.Header.Get("X-Ratelimit-Remaining-Requests") != "5" {
		t.Fatalf("stream headers %v", sresp.Header)
	}
	// The provider is blocked on the gate after its first event: reading
	// it proves the event was flushed through the limiter's writer.
	buf := make([]byte, 4096)
	n, err := sresp.Body.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"content":"a"`) {
		t.Fatalf("first event: %q %v", buf[:n], err)
	}
	close(gate)
}
