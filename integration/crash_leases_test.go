package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// budgetCrashDB is the Redis database of the crash tests below (each
// flushes it before and after), so their limits on the test key reach no
// other test.
const budgetCrashDB = 5

// TestBudgetCrashReservationsExpire: two gateways on one Redis, the
// gateway binary (A) and this process's Caddy (B), with a $0.01 budget
// per key and a 3 s reservation lease (budgets { lease 3s }). A opens
// streams against a fake provider that holds them after the first chunk,
// until the budget is all reserved (A's next request is a 412), and is
// SIGKILLed with them in flight: nothing of theirs is ever settled. B
// refuses while their leases run; once they ran out, B admits requests
// (each charged a fixed usage) up to the whole budget, and the settled
// spend is exactly the sum of what B's answers were charged.
func TestBudgetCrashReservationsExpire(t *testing.T) {
	rc, bin, up, killed := crashStart(t)

	const lease = 3 * time.Second
	llm := fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t\tfail_closed\n\t\t}\n\t\tbudgets {\n\t\t\tlease 3s\n\t\t\tmax_wait 200ms\n\t\t}",
		redistest.Addr(), budgetCrashDB)
	loadRL(t, rlSite{Redis: llm, NoLimiter: true})
	const budgetNano = 10_000_000 // cost counters count nano-dollars
	limit := `{"name": "crash", "type": "cost", "credit_limit": 0.01, "periodic_reset": "monthly",
	"conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}]}`
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", limit); status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}

	portA := freePort()
	dir := t.TempDir()
	a := startGateway(t, bin, dir, rlSite{Redis: llm, Storage: filepath.Join(dir, "storage"), HTTPPort: portA,
		AdminPort: freePort(), Log: filepath.Join(dir, "a.log"), NoLimiter: true}.caddyfile(), portA)
	baseA := fmt.Sprintf("http://127.0.0.1:%d/v1", portA)

	// A reserves the whole budget with streams in flight.
	held, firstAt := holdStreams(t, baseA, up.URL, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`,
		http.StatusPreconditionFailed)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	close(killed)
	killedAt := time.Now()
	if _, leases := leaseCounters(t, rc, "*budget|*"); leases != len(held) {
		t.Fatalf("%d reservations held in Redis after the kill, want A's %d", leases, len(held))
	}

	// While A's leases run, B finds the budget reserved.
	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
	if time.Since(firstAt) < lease && resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("B before the lease ran out: %d %s, want 412", resp.StatusCode, raw)
	}
	time.Sleep(time.Until(firstAt.Add(lease + 500*time.Millisecond)))

	var admitted int
	var charged int64
	var firstOK time.Duration
	for i := 0; ; i++ {
		resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
		if resp.StatusCode == http.StatusPreconditionFailed {
			break
		}
		if resp.StatusCode != 200 || i > 50 {
			t.Fatalf("request %d on B after the lease: %d %s", i, resp.StatusCode, raw)
		}
		if admitted == 0 {
			firstOK = time.Since(killedAt)
		}
		admitted++
		charged += costNano(t, resp.Header.Get("X-Gateway-Cost"))
	}
	// The usage API shows at most the limit; the counter in Redis holds
	// the settled spend itself (its bucket fields), and the reservations
	// still held are a sorted set beside it: none are left.
	spent, leases := leaseCounters(t, rc, "*budget|*")
	one := charged / int64(max(admitted, 1))
	t.Logf("A held %d streams (the budget reserved) and was killed; B's first admission %.2fs after the kill (%.2fs after A's first reservation), "+
		"%d admitted, charged %d n$ (%d each), settled spend %d n$ of %d, %d reservations left",
		len(held), firstOK.Seconds(), (time.Since(firstAt) - time.Since(killedAt) + firstOK).Seconds(), admitted, charged, one, spent, budgetNano, leases)
	if spent != charged || leases != 0 {
		t.Errorf("settled spend %d n$ with %d reservations held, want the %d n$ B's answers were charged and none", spent, leases, charged)
	}
	if spent < budgetNano || spent > budgetNano+one {
		t.Errorf("settled spend %d n$ of a %d n$ budget: want all of it usable, at most one request (%d) past it", spent, budgetNano, one)
	}
}

// TestRateLimitCrashReservationsExpire: two gateways on one Redis, the
// gateway binary (A) and this process's Caddy (B), with a tokens policy
// of 3,500 a day per key and a 2 s reservation lease (llm_ratelimit {
// reservation_lease 2s }). A opens streams of max_tokens 1,000 that the
// provider holds after the first chunk until the policy is all reserved
// (A's next request is a 429), and is SIGKILLed with them in flight. B
// refuses while their leases run, not for the rest of the day; once they
// ran out, B admits requests whose usage (2,000 tokens each) is settled,
// and the counter holds exactly that usage with no reservation left.
func TestRateLimitCrashReservationsExpire(t *testing.T) {
	rc, bin, up, killed := crashStart(t)

	const lease = 2 * time.Second
	llm := fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t\tfail_closed\n\t\t}", redistest.Addr(), budgetCrashDB)
	limit := "\t\t\treservation_lease 2s\n\t\t\tpolicy crash {\n\t\t\t\ttype tokens\n\t\t\t\tunit rpd\n\t\t\t\tvalue 3500\n\t\t\t\tgroup_by api_key\n\t\t\t}"
	loadRL(t, rlSite{Redis: llm, Limit: limit})
	portA := freePort()
	dir := t.TempDir()
	a := startGateway(t, bin, dir, rlSite{Redis: llm, Limit: limit, Storage: filepath.Join(dir, "storage"), HTTPPort: portA,
		AdminPort: freePort(), Log: filepath.Join(dir, "a.log")}.caddyfile(), portA)
	baseA := fmt.Sprintf("http://127.0.0.1:%d/v1", portA)

	held, firstAt := holdStreams(t, baseA, up.URL,
		`{"model":"gpt-4o-mini","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"tell me a long story"}]}`,
		http.StatusTooManyRequests)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	close(killed)
	if _, leases := leaseCounters(t, rc, policies.DefaultKeyPrefix+"*"); leases != len(held) {
		t.Fatalf("%d reservations held in Redis after the kill, want A's %d", leases, len(held))
	}

	body := `{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
	if time.Since(firstAt) < lease && resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("B before the lease ran out: %d %s, want 429", resp.StatusCode, raw)
	}
	time.Sleep(time.Until(firstAt.Add(lease + 500*time.Millisecond)))
	admitted := 0
	for i := 0; ; i++ {
		resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, body)
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		if resp.StatusCode != 200 || i > 10 {
			t.Fatalf("request %d on B after the lease: %d %s", i, resp.StatusCode, raw)
		}
		admitted++
	}
	used, leases := leaseCounters(t, rc, policies.DefaultKeyPrefix+"*")
	t.Logf("A held %d streams (the policy reserved) and was killed; after the lease B admitted %d, counter %d tokens, %d reservations left",
		len(held), admitted, used, leases)
	if admitted != 2 || used != int64(admitted)*2000 || leases != 0 {
		t.Errorf("B admitted %d with %d tokens counted and %d reservations held, want 2 admitted, their 4000 tokens and none held",
			admitted, used, leases)
	}
}

// leaseCounters sums the limiter counters in the test's database whose
// keys match pattern: the units in their buckets and the reservations
// still held.
func leaseCounters(t *testing.T, rc *redis.Client, pattern string) (units int64, leases int) {
	t.Helper()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		switch typ, _ := rc.Type(ctx, k).Result(); typ {
		case "zset": // the reservations held (policies/lease_redis.go)
			n, _ := rc.ZCard(ctx, k).Result()
			leases += int(n)
			continue
		case "hash":
		default:
			continue
		}
		fields, err := rc.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range fields {
			if f == "w" {
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			units += n
		}
	}
	return units, leases
}

// crashStart prepares a crash test: its Redis database, flushed before
// and after, the gateway binary, and a hangingUpstream.
func crashStart(t *testing.T) (rc *redis.Client, bin string, up *fakeOpenAI, killed chan struct{}) {
	rc = redistest.Client(t, budgetCrashDB)
	if err := rc.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.FlushDB(context.Background()) })
	up, killed = hangingUpstream(t)
	return rc, buildGateway(t), up, killed
}

// hangingUpstream is a fake provider whose chat streams send their first
// chunk and then hang until killed is closed (their gateway is gone) or
// the client leaves; a chat completion without stream is answered at
// once with 1,000 prompt and 1,000 completion tokens.
func hangingUpstream(t *testing.T) (up *fakeOpenAI, killed chan struct{}) {
	killed = make(chan struct{})
	up = newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		if !gjson.GetBytes(body, "stream").Bool() {
			writeJSON(w, 200, []byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":1000,"total_tokens":2000}}`))
			return true
		}
		// A stream that starts and then hangs until its gateway is gone.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-killed:
		case <-r.Context().Done():
		}
		return true
	}

	return up, killed
}

// holdStreams opens streams of body through the gateway at base, each
// read to its first chunk and left open, until the gateway answers
// refused (at most 100); it returns the open streams and when the first
// was admitted. It fails the test when none or all 100 were admitted.
func holdStreams(t *testing.T, base, upURL, body string, refused int) (held []io.Closer, firstAt time.Time) {
	t.Helper()
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for len(held) < 100 {
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
		for _, h := range [][2]string{{"x-gateway-api-key", gatewayKey}, {"x-gateway-provider", "openai"},
			{"x-gateway-custom-host", upURL}, {"Authorization", "Bearer sk-test-provider"}, {"Content-Type", "application/json"}} {
			req.Header.Set(h[0], h[1])
		}
		resp, err := rlClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == refused {
			resp.Body.Close()
			break
		}
		if resp.StatusCode != 200 {
			raw, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %d: %d %s", len(held), resp.StatusCode, raw)
		}
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		held = append(held, resp.Body)
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatalf("stream %d: no first chunk: %v", len(held), err)
		}
	}
	if len(held) == 0 || len(held) == 100 {
		t.Fatalf("held %d streams; want the limit reserved by a few", len(held))
	}
	return held, firstAt
}
