package integration

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// delayed is a fake OpenAI provider whose answers wait delay before their
// first byte, and which counts the chat completions it answered.
type delayed struct {
	*fakeOpenAI
	delay atomic.Int64
	hits  atomic.Int64
}

func newDelayed(t testing.TB) *delayed {
	d := &delayed{fakeOpenAI: newFakeOpenAI(t)}
	d.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.URL.Path == "/v1/chat/completions" {
			d.hits.Add(1)
			time.Sleep(time.Duration(d.delay.Load()))
		}
		return false // the fake's own answer, after the wait
	}
	return d
}

// take returns and resets the hit count.
func (d *delayed) take() int { return int(d.hits.Swap(0)) }

// TestLeastLatencyShiftsAndReturns: of two targets, one ~200 ms slower to
// its first byte, least_latency sends ≥ 90 % of 300 requests to the
// faster one; after the slow one recovers it comes back. Time is the
// gateway's test clock: it stands still while requests run (so the slow
// target gets no probe), and each step of 11 s lets one probe per stale
// target through.
func TestLeastLatencyShiftsAndReturns(t *testing.T) {
	fast, slow := newDelayed(t), newDelayed(t)
	slow.delay.Store(int64(200 * time.Millisecond))
	clock := useTestClock(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"loadbalance","loadbalance":"least_latency"},"targets":[` +
		target(fast.fakeOpenAI, "") + `,` + target(slow.fakeOpenAI, "") + `]}`
	send := func(n int) {
		t.Helper()
		for range n {
			if resp, raw := chat(t, cfg); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
		}
	}

	send(300)
	f, s := fast.take(), slow.take()
	if f < 270 {
		t.Fatalf("the faster target got %d of 300 requests (slow %d), want ≥ 90 %%", f, s)
	}
	t.Logf("slow phase: fast %d, slow %d of 300", f, s)

	slow.delay.Store(0)
	for round := 1; ; round++ {
		clock.advance(11 * time.Second)
		send(40)
		f, s = fast.take(), slow.take()
		if s >= 12 {
			t.Logf("recovered after %d probe rounds: fast %d, slow %d of 40", round, f, s)
			break
		}
		if round == 10 {
			t.Fatalf("the recovered target never came back: fast %d, slow %d of the last 40", f, s)
		}
	}
}

// TestLeastInflightPrefersIdle: while a request is held open on one
// target, least_inflight sends every other request to the idle one.
func TestLeastInflightPrefersIdle(t *testing.T) {
	busy, idle := newFakeOpenAI(t), newDelayed(t)
	var held atomic.Int64
	arrived, release := make(chan struct{}, 64), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	// Before the fakes close (cleanups run last first): a failing test
	// must not leave requests held, or closing the server would wait on
	// them.
	t.Cleanup(free)
	busy.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		held.Add(1)
		arrived <- struct{}{}
		<-release
		return false
	}
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"loadbalance","loadbalance":"least_inflight"},"targets":[` +
		target(busy, "") + `,` + target(idle.fakeOpenAI, "") + `]}`

	done := make(chan int, 64)
	header := compactJSON(t, cfg)
	go1 := func() {
		go func() {
			// Not chat: a failure here must not call t.Fatal off the
			// test's goroutine.
			req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", strings.NewReader(chatBody))
			req.Header.Set("x-gateway-api-key", gatewayKey)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-gateway-config", header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	// Equal counts at first: requests go either way until one is held.
	for i := 0; held.Load() == 0; i++ {
		if i == 64 {
			t.Fatal("no request reached the first target in 64 draws")
		}
		go1()
		select {
		case <-arrived:
		case status := <-done:
			if status != 200 {
				t.Fatalf("status %d", status)
			}
		}
	}
	idle.take()
	for range 50 {
		go1()
		select {
		case <-arrived:
			t.Fatal("a request went to the target with one in flight while the other was idle")
		case status := <-done:
			if status != 200 {
				t.Fatalf("status %d", status)
			}
		}
	}
	if n := idle.take(); n != 50 {
		t.Fatalf("the idle target answered %d of 50", n)
	}
	free()
	if status := <-done; status != 200 {
		t.Fatalf("the held request: status %d", status)
	}
}

// TestCheapestPicksByCatalogPrice: cheapest sends the request to the
// target whose model the operator's price_catalog prices lower, and a
// reload with the prices swapped turns the traffic around.
func TestCheapestPicksByCatalogPrice(t *testing.T) {
	a, b := newDelayed(t), newDelayed(t)
	file := filepath.Join(t.TempDir(), "prices.json")
	write := func(cheap, dear string) {
		t.Helper()
		data := `{"` + cheap + `":{"litellm_provider":"openai","mode":"chat","input_cost_per_token":1e-07,"output_cost_per_token":4e-07},` +
			`"` + dear + `":{"litellm_provider":"openai","mode":"chat","input_cost_per_token":3e-06,"output_cost_per_token":1.2e-05}}`
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := `{"strategy":{"mode":"loadbalance","loadbalance":"cheapest"},"targets":[` +
		target(a.fakeOpenAI, `"override_params":{"model":"house-large"}`) + `,` +
		target(b.fakeOpenAI, `"override_params":{"model":"house-small"}`) + `]}`
	for _, tt := range []struct {
		cheap, dear string
		wantA       int
	}{{"house-small", "house-large", 0}, {"house-large", "house-small", 20}} {
		write(tt.cheap, tt.dear)
		loadFresh(t, site{LLM: "price_catalog " + file})
		for range 20 {
			if resp, raw := chat(t, cfg); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
		}
		if got, gotB := a.take(), b.take(); got != tt.wantA || got+gotB != 20 {
			t.Fatalf("%s cheapest: a (house-large) got %d, b %d of 20", tt.cheap, got, gotB)
		}
	}
}
