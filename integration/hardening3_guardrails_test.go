package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowHook is a webhook endpoint that holds every call until the test
// ends (or the caller gives up), counting the calls it got.
type slowHook struct {
	*httptest.Server
	calls   atomic.Int64
	release chan struct{}
}

func newSlowHook(t *testing.T) *slowHook {
	h := &slowHook{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"verdict":true}`)
	}))
	t.Cleanup(h.Close)
	t.Cleanup(h.free)
	return h
}

var slowHookFree sync.Mutex

func (h *slowHook) free() {
	slowHookFree.Lock()
	defer slowHookFree.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// chatWithPrompt is a chat body whose user message is prompt, for a
// model without a context window in the catalog (some prompts are over
// 128k tokens, which token preflight would refuse for gpt-4o-mini).
func chatWithPrompt(prompt string) []byte {
	b, _ := json.Marshal(map[string]any{"model": largeBodyModel, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	return b
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHardening3AsyncHooksBounded: 1,000 requests with a 100 KB prompt
// behind an async webhook that never answers during the run. Before the
// pool, each request left a goroutine holding its request and answer (and
// a connection to the webhook): thousands of goroutines and hundreds of
// MB. Now goroutines and heap stay bounded, every run beyond the pool's
// workers and queue is dropped and counted, and each run is either
// executed or counted, none lost silently.
func TestHardening3AsyncHooksBounded(t *testing.T) {
	up := newFakeOpenAI(t)
	hook := newSlowHook(t)
	loadFresh(t, site{})
	hooks := `"before_request_hooks":[{"id":"audit","async":true,"checks":[{"id":"default.webhook","parameters":{"webhookURL":"` + hook.URL + `/audit","timeout":30000}}]}]`
	cfg := compactJSON(t, guardConfig(up, hooks))
	body := chatWithPrompt(strings.Repeat("a", 100<<10))
	dropped := `llm_gateway_async_hooks_dropped_total{reason="queue_full"}`
	metricsBefore := scrapeMetrics(t)
	goroutinesBefore, heapBefore := runtime.NumGoroutine(), heapInUse()

	const requests, clients = 1000, 8
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= requests {
				resp, _ := do(t, "POST", "/chat/completions", body, "x-gateway-config", cfg)
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d requests did not answer 200", n)
	}
	// The fake provider keeps every request it got (100 MB here): that is
	// the test's memory, not the gateway's.
	up.mu.Lock()
	up.seen = nil
	up.mu.Unlock()
	goroutines, heap := runtime.NumGoroutine()-goroutinesBefore, int64(heapInUse())-int64(heapBefore)
	t.Logf("with the webhook holding every call: %d more goroutines, heap %+.1f MB, webhook calls so far %d",
		goroutines, float64(heap)/(1<<20), hook.calls.Load())
	// 16 workers, each with a connection to the webhook (two goroutines
	// on the client side, one on the server), plus idle connections.
	if goroutines > 300 {
		t.Errorf("%d more goroutines after %d requests; the async pool should bound them near 100", goroutines, requests)
	}
	// The queue holds at most 256 runs (~28 MB of prompts here), the
	// workers 16 more with their webhook payloads; 1,000 held runs were
	// ~300 MB.
	if heap > 100<<20 {
		t.Errorf("heap grew by %.1f MB after %d requests, want well under 100 MB", float64(heap)/(1<<20), requests)
	}
	drops := scrapeMetrics(t)[dropped] - metricsBefore[dropped]
	if drops < requests-16-256-clients {
		t.Errorf("%s grew by %v, want at least %d", dropped, drops, requests-16-256-clients)
	}

	// Every run was executed or dropped: once the webhook answers, the
	// accepted runs all reach it.
	hook.free()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && float64(hook.calls.Load())+drops < requests {
		time.Sleep(50 * time.Millisecond)
	}
	if got := float64(hook.calls.Load()) + drops; got != requests {
		t.Errorf("webhook calls %d + drops %v = %v, want %d", hook.calls.Load(), drops, got, requests)
	}
	log := readLog(t)
	warnings := strings.Count(log, `"msg":"llm async hooks dropped`)
	if warnings == 0 || warnings > 20 {
		t.Errorf("%d drop warnings logged, want a few (rate-limited)", warnings)
	}
	if strings.Contains(log, strings.Repeat("a", 1000)) {
		t.Error("the log holds the prompt")
	}
}

// webhookChecks is a hook with n webhook checks posting to url.
func webhookChecks(n int, url string) string {
	checks := make([]string, n)
	for i := range checks {
		checks[i] = `{"id":"default.webhook","parameters":{"webhookURL":"` + url + `/` + itoa(i) + `","timeout":20000}}`
	}
	return `{"id":"many","checks":[` + strings.Join(checks, ",") + `]}`
}

// TestHardening3WebhookChecksBounded: a config naming more than 32
// checks in a stage is refused (400 inline, a load error saved) before
// any webhook is called; at the limit, the checks run at most 4 at a
// time and share one copy of a 2 MB prompt, so the live heap while they
// run stays far below one payload per check (32 × ~4 MB before).
func TestHardening3WebhookChecksBounded(t *testing.T) {
	up := newFakeOpenAI(t)
	var inFlight, maxInFlight, calls atomic.Int64
	var heapMu sync.Mutex
	var peakHeap uint64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		_, _ = io.Copy(io.Discard, r.Body)
		// The live heap while this call (and the others running) hold
		// their payloads.
		h := heapInUse()
		heapMu.Lock()
		peakHeap = max(peakHeap, h)
		heapMu.Unlock()
		time.Sleep(20 * time.Millisecond) // let concurrent calls overlap
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"verdict":true}`)
	}))
	defer hook.Close()
	loadFresh(t, site{})

	prompt := strings.Repeat("b", 2<<20)
	body := chatWithPrompt(prompt)
	over := compactJSON(t, guardConfig(up, `"before_request_hooks":[`+webhookChecks(150, hook.URL)+`]`))
	resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-config", over)
	if resp.StatusCode != 400 || !strings.Contains(string(raw), "150 checks") || !strings.Contains(string(raw), "at most 32") {
		t.Fatalf("150 checks: status %d %s", resp.StatusCode, raw)
	}
	// The limit is on the stage: 20 checks in before_request_hooks and
	// 20 one-check input guardrails are over too.
	short := make([]string, 20)
	for i := range short {
		short[i] = `{"default.webhook":{"webhookURL":"` + hook.URL + `/s"}}`
	}
	split := compactJSON(t, guardConfig(up, `"before_request_hooks":[`+webhookChecks(20, hook.URL)+`],"input_guardrails":[`+strings.Join(short, ",")+`]`))
	if resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-config", split); resp.StatusCode != 400 || !strings.Contains(string(raw), "40 checks") {
		t.Fatalf("20+20 checks: status %d %s", resp.StatusCode, raw)
	}
	if calls.Load() != 0 || up.count() != 0 {
		t.Fatalf("refused configs reached %d webhooks and %d providers", calls.Load(), up.count())
	}

	heapBefore := heapInUse()
	at := compactJSON(t, guardConfig(up, `"before_request_hooks":[`+webhookChecks(32, hook.URL)+`]`))
	resp, raw = do(t, "POST", "/chat/completions", body, "x-gateway-config", at)
	if resp.StatusCode != 200 || calls.Load() != 32 {
		t.Fatalf("32 checks: status %d, %d webhook calls: %.300s", resp.StatusCode, calls.Load(), raw)
	}
	growth := int64(peakHeap) - int64(heapBefore)
	t.Logf("32 webhook checks, 2 MB prompt: at most %d calls at once, live heap +%.1f MB while they ran", maxInFlight.Load(), float64(growth)/(1<<20))
	if m := maxInFlight.Load(); m > 4 {
		t.Errorf("%d webhook calls ran at once, want at most 4", m)
	}
	if growth > 48<<20 {
		t.Errorf("live heap grew by %.1f MB while 32 checks ran on a 2 MB prompt, want under 48 MB (one shared payload)", float64(growth)/(1<<20))
	}

	// Saved guardrails and saved configs over the limit fail the load.
	many := webhookChecks(33, "https://hooks.example.com")
	for name, llm := range map[string]string{
		"saved guardrail": "guardrail many `" + many + "`",
		"saved config":    "config many `" + `{"provider":"openai","api_key":"k","after_request_hooks":[` + webhookChecks(17, "https://hooks.example.com") + `,` + webhookChecks(16, "https://hooks.example.com") + `]}` + "`",
	} {
		err := tryLoad(site{LLM: llm})
		if err == nil || !strings.Contains(err.Error(), "33 checks") || !strings.Contains(err.Error(), "at most 32") {
			t.Errorf("%s with 33 checks: load error %v", name, err)
		}
	}
}

// TestHardening3WebhookURLMasked: a saved guardrail's webhook URL with
// user:pass@ and a token in its query, with the webhook down: neither
// the answer's hook_results, nor the request's log entry, nor the async
// hooks' log entry carries the credentials.
func TestHardening3WebhookURLMasked(t *testing.T) {
	up := newFakeOpenAI(t)
	down := freePort() // nothing listens there
	url := "http://hookuser:hookpass-S3CRET@127.0.0.1:" + itoa(down) + "/hooks/path-S3CRET?token=tok-S3CRET&team=a"
	sync := `{"id":"audit","checks":[{"id":"default.webhook","parameters":{"webhookURL":"` + url + `","failOnError":true}}]}`
	async := `{"id":"audit-async","async":true,"checks":[{"id":"default.webhook","parameters":{"webhookURL":"` + url + `"}}]}`
	loadFresh(t, site{LLM: "guardrail audit `" + sync + "`\n\t\tguardrail audit-async `" + async + "`"})
	resp, body := chat(t, guardConfig(up, `"input_guardrails":["audit","audit-async"]`), "x-gateway-trace-id", "mask-1")
	if resp.StatusCode != 246 {
		t.Fatalf("status %d, want 246 (the failing webhook): %s", resp.StatusCode, body)
	}
	hr := resultsOf(t, body)
	if len(hr.Before) != 1 || len(hr.Before[0].Checks) != 1 || hr.Before[0].Checks[0].Error == nil {
		t.Fatalf("hook_results %s", body)
	}
	if !strings.Contains(string(body), "127.0.0.1:"+itoa(down)) {
		t.Errorf("the error should still name the webhook's origin: %s", body)
	}
	var asyncLine string
	for i := 0; i < 500 && asyncLine == ""; i++ {
		for _, l := range strings.Split(readLog(t), "\n") {
			if strings.Contains(l, `"msg":"llm async hooks"`) && strings.Contains(l, `"trace_id":"mask-1"`) {
				asyncLine = l
			}
		}
	}
	if !strings.Contains(asyncLine, "127.0.0.1:"+itoa(down)) {
		t.Fatalf("no async hook entry with the webhook's error: %q", asyncLine)
	}
	for name, text := range map[string]string{"hook_results": string(body), "log": readLog(t)} {
		for _, secret := range []string{"S3CRET", "hookuser"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains %q", name, secret)
			}
		}
	}
}

// TestHardening3DenyWithholdsData: an output guardrail's 446 says which
// check denied, not what it matched: the withheld answer appears nowhere
// in it (no matchedText, no textExcerpt), and neither does the rule. The
// request's log entry keeps the full results.
func TestHardening3DenyWithholdsData(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cases := []struct{ name, hooks string }{
		{"output", `"output_guardrails":[{"id":"no-hello","deny":true,"default.regexMatch":{"rule":"Hel+o","not":true},"default.wordCount":{"minWords":5,"maxWords":9}}]`},
		{"input", `"input_guardrails":[{"id":"no-hello","deny":true,"default.regexMatch":{"rule":"Hel+o","not":true},"default.wordCount":{"minWords":5,"maxWords":9}}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := chatWithPrompt("Hello there")
			trace := "deny-data-" + tc.name
			resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-config", compactJSON(t, guardConfig(up, tc.hooks)), "x-gateway-trace-id", trace)
			if resp.StatusCode != 446 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			for _, leak := range []string{"Hello", "Hel+o", "matchedText", "textExcerpt", "regexPattern"} {
				if strings.Contains(string(raw), leak) {
					t.Errorf("the 446 discloses %q: %s", leak, raw)
				}
			}
			hr := resultsOf(t, raw)
			hooks := hr.After
			if tc.name == "input" {
				hooks = hr.Before
			}
			if len(hooks) != 1 || hooks[0].ID != "no-hello" || !hooks[0].Deny || len(hooks[0].Checks) != 2 ||
				hooks[0].Checks[0].ID != "default.regexMatch" || hooks[0].Checks[0].Verdict {
				t.Fatalf("the 446 must name the check that denied: %s", raw)
			}
			if line := logLineFor(t, trace); !strings.Contains(line, `"matchedText":"Hello"`) {
				t.Errorf("the log entry lost the check data: %s", line)
			}
		})
	}
}

// TestHardening3CheckParamsValidated: a check missing a required
// parameter (or giving it the wrong type) is refused: a 400 naming the
// parameter for a request's config, a load error for a saved guardrail or
// config. Before, `wordCount` without `maxWords` loaded and then passed
// everything.
func TestHardening3CheckParamsValidated(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cases := []struct{ hook, param string }{
		{`{"default.wordCount":{"minWords":1},"deny":true}`, "maxWords"},
		{`{"default.sentenceCount":{"maxSentences":3},"deny":true}`, "minSentences"},
		{`{"default.characterCount":{"minCharacters":1,"maxCharacters":"9"},"deny":true}`, "maxCharacters"},
		{`{"default.regexMatch":{"not":true},"deny":true}`, "rule"},
		{`{"default.contains":{"words":["x"]},"deny":true}`, "operator"},
		{`{"default.jsonKeys":{"operator":"all"},"deny":true}`, "keys"},
		{`{"default.endsWith":{},"deny":true}`, "suffix"},
		{`{"default.modelWhitelist":{"not":true},"deny":true}`, "models"},
		{`{"default.requiredMetadataKeys":{"metadataKeys":["team"]},"deny":true}`, "operator"},
		{`{"default.webhook":{"timeout":100},"deny":true}`, "webhookURL"},
		{`{"id":"p","type":"mutator","checks":[{"id":"default.addPrefix","parameters":{}}]}`, "prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.param, func(t *testing.T) {
			field := "input_guardrails"
			if strings.Contains(tc.hook, `"checks"`) {
				field = "before_request_hooks" // the full form
			}
			resp, body := chat(t, guardConfig(up, `"`+field+`":[`+tc.hook+`]`))
			if resp.StatusCode != 400 || !strings.Contains(string(body), `\"`+tc.param+`\"`) || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
				t.Fatalf("status %d %s, want 400 naming %q", resp.StatusCode, body, tc.param)
			}
		})
	}
	if up.count() != 0 {
		t.Fatalf("the provider was called %d times", up.count())
	}
	for name, llm := range map[string]string{
		"saved guardrail": "guardrail short `" + `{"default.wordCount":{"minWords":1},"deny":true}` + "`",
		"saved config":    "config short `" + `{"provider":"openai","api_key":"k","targets":[{"provider":"openai","api_key":"k","output_guardrails":[{"default.wordCount":{"minWords":1}}]}]}` + "`",
	} {
		if err := tryLoad(site{LLM: llm}); err == nil || !strings.Contains(err.Error(), `"maxWords"`) {
			t.Errorf("%s missing maxWords: load error %v", name, err)
		}
	}
}
