package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// affinityDB is the Redis database the affinity tests use.
const affinityDB = 12

// startAffinityTrio starts three gateways on one Redis (this process's
// Caddy and two subprocesses, each with its own ports and storage) and
// returns their /v1 base URLs.
func startAffinityTrio(t *testing.T, prefix string) []string {
	t.Helper()
	redistest.Client(t, affinityDB)
	bin := buildGateway(t)
	rb := fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t\tkey_prefix %s\n\t\t}", redistest.Addr(), affinityDB, prefix)
	bases := []string{}
	for range 2 {
		port, dir := freePort(), t.TempDir()
		s := rlSite{Redis: rb, NoLimiter: true, Storage: filepath.Join(dir, "storage"),
			HTTPPort: port, AdminPort: freePort(), Log: filepath.Join(dir, "gw.log")}
		startGateway(t, bin, dir, s.caddyfile(), port)
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d/v1", port))
	}
	loadRL(t, rlSite{Redis: rb, NoLimiter: true})
	return append([]string{gatewayURL()}, bases...)
}

// turn sends one chat turn to base and returns the status.
func turn(t *testing.T, base, config, body string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/chat/completions", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-gateway-api-key", gatewayKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-gateway-config", config)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rlClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// conversation is turn n of one conversation: the same system prompt and
// first user turn, then n more exchanges.
func conversation(first string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":%q}`, first)
	for i := range n {
		fmt.Fprintf(&b, `,{"role":"assistant","content":"answer %d"},{"role":"user","content":"follow-up %d"}`, i, i)
	}
	b.WriteString("]}")
	return b.String()
}

// TestAffinityAcrossInstances: 100 turns of one session spread round robin
// over three gateways sharing one Redis reach one of three targets (all
// of them, not ≥ 99 %), both for a session named by x-gateway-session-id
// and for one known only by its conversation; when that target goes
// down the session moves (each instance sends at most one turn to the
// dead target before its breaker opens) and then stays on one target.
// The pins are under the key_prefix in Redis.
func TestAffinityAcrossInstances(t *testing.T) {
	prefix := "aff-" + uuid.NewString()[:8] + ":"
	bases := startAffinityTrio(t, prefix)
	ups := []*fakeOpenAI{newFakeOpenAI(t), newFakeOpenAI(t), newFakeOpenAI(t)}
	var targets []string
	for _, u := range ups {
		targets = append(targets, target(u, ""))
	}
	cfg := compactJSON(t, `{"strategy":{"mode":"loadbalance","affinity":{}},"cb_config":{"failure_threshold":1,"cooldown_interval":600000},"targets":[`+
		strings.Join(targets, ",")+`]}`)
	counts := func() [3]int { return [3]int{ups[0].count(), ups[1].count(), ups[2].count()} }
	delta := func(before [3]int) [3]int {
		now := counts()
		return [3]int{now[0] - before[0], now[1] - before[1], now[2] - before[2]}
	}
	pinned := func(d [3]int, total int) int {
		t.Helper()
		for i, n := range d {
			if n == total {
				return i
			}
		}
		t.Fatalf("%d turns of one session spread over the targets: %v", total, d)
		return -1
	}

	session := uuid.NewString()
	first := "first turn " + uuid.NewString()
	cases := []struct {
		name    string
		headers []string
	}{
		{"session header", []string{"x-gateway-session-id", session}},
		{"conversation", nil},
	}
	for _, c := range cases {
		before := counts()
		for n := range 100 {
			if st := turn(t, bases[n%3], cfg, conversation(first, n), c.headers...); st != 200 {
				t.Fatalf("%s: turn %d: status %d", c.name, n, st)
			}
		}
		d := delta(before)
		pinned(d, 100)
		t.Logf("%s: 100 turns over 3 instances reached the targets %v", c.name, d)
	}

	// Pins live under the key prefix, and nowhere else.
	rdb := redistest.Client(t, affinityDB)
	keys, err := rdb.Keys(context.Background(), prefix+"llm:affinity:*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("pins in Redis under the prefix: %v %v, want the two sessions'", keys, err)
	}

	// The session's target goes down.
	before := counts()
	for n := range 3 {
		turn(t, bases[n%3], cfg, conversation(first, 100+n), "x-gateway-session-id", session)
	}
	dead := pinned(delta(before), 3)
	ups[dead].Close()
	failed := 0
	before = counts()
	for n := range 60 {
		if st := turn(t, bases[n%3], cfg, conversation(first, 103+n), "x-gateway-session-id", session); st != 200 {
			failed++
		}
	}
	d := delta(before)
	d[dead] = 0
	if failed > 3 {
		t.Fatalf("%d turns failed after the target went down, want at most one per instance", failed)
	}
	moved := pinned(d, 60-failed)
	if moved == dead {
		t.Fatal("the session stayed on the dead target")
	}
	t.Logf("after target %d went down: %d turns failed, the other %d all reached target %d", dead, failed, 60-failed, moved)
}
