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

// chatWithPrompt is a chat body whose user message is prompt.
func chatWithPrompt(prompt string) []byte {
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": prompt}}})
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
	goroutines, heap := runtime.NumGoroutine()-goroutinesBefore, int64(heapInUse())-int64(heapBefore)
	t.Logf("with the webhook holding every call: %d more goroutines, heap %+.1f MB, webhook calls so far %d",
		goroutines, float64(heap)/(1<<20), hook.calls.Load())
	// 16 workers, each with a connection to the webhook (two goroutines
	// on the client side, one on the server), plus idle connections.
	if goroutines > 300 {
		t.Errorf("%d more goroutines after %d requests; the async pool should bound them near 100", goroutines, requests)
	}
	// The queue holds at most 256 runs (~26 MB of prompts here), the
	// workers 16 more with their webhook payloads.
	if heap > 150<<20 {
		t.Errorf("heap grew by %.1f MB after %d requests, want well under 150 MB", float64(heap)/(1<<20), requests)
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
