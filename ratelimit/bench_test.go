package ratelimit

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// benchControl is fakeControl with a key check that costs what the llm
// app's does (SHA-256 of the presented key and a constant-time compare
// with every configured key), so the benchmarks include it.
type benchControl struct {
	*fakeControl
	digests [][sha256.Size]byte
	ids     []*identity.Caller
}

func (b benchControl) Authenticate(key string) (*identity.Caller, bool) {
	if key == "" {
		return nil, false
	}
	d := sha256.Sum256([]byte(key))
	var found *identity.Caller
	for i := range b.digests {
		if subtle.ConstantTimeCompare(d[:], b.digests[i][:]) == 1 {
			found = b.ids[i]
		}
	}
	return found, found != nil
}

func newBenchControl(_ *testing.B) benchControl {
	return benchControl{
		fakeControl: newControl(),
		digests:     [][sha256.Size]byte{sha256.Sum256([]byte("key-alice")), sha256.Sum256([]byte("key-bob"))},
		ids:         []*identity.Caller{testAlice, testBob},
	}
}

// benchAdmit measures h.admit on one request, which must reach the
// expected outcome on every iteration.
func benchAdmit(b *testing.B, h *Handler, wantMatch bool) {
	r := newRequest("key-alice", []byte(chatBody), "X-Gateway-Provider", "openai")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v, err := h.admit(r, nil)
		if err != nil || (v != nil) != wantMatch || (v != nil && v.refused != nil) {
			b.Fatalf("admit: %+v, %v", v, err)
		}
	}
}

// BenchmarkAdmitNoPolicies is a route with llm_ratelimit and no policy at
// all: one atomic load of the active set.
func BenchmarkAdmitNoPolicies(b *testing.B) {
	ctl := newBenchControl(b)
	benchAdmit(b, newHandler(b, ctl), false)
}

// BenchmarkAdmitNoMatch has ten policies, none of which applies to the
// request (other workspaces' conditions): key check plus matching.
func BenchmarkAdmitNoMatch(b *testing.B) {
	ctl := newBenchControl(b)
	for i := 0; i < 10; i++ {
		addPolicy(b, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, 10, cond("workspace_id", otherWS), "api_key")
	}
	benchAdmit(b, newHandler(b, ctl), false)
}

// BenchmarkAdmitMemory admits against one requests policy in the
// in-process limiter.
func BenchmarkAdmitMemory(b *testing.B) {
	ctl := newBenchControl(b)
	addPolicy(b, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, policies.MaxValue, cond("workspace_id", testWS), "api_key")
	benchAdmit(b, newHandler(b, ctl), true)
}

// BenchmarkAdmitRedis admits against one requests policy in Redis: one
// Lua script round trip.
func BenchmarkAdmitRedis(b *testing.B) {
	ctl := newBenchControl(b)
	ctl.limiter = newRedisLimiter(b)
	addPolicy(b, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, policies.MaxValue, cond("workspace_id", testWS), "api_key")
	benchAdmit(b, newHandler(b, ctl), true)
}

// BenchmarkTokensHoldSettle admits a request against one hourly tokens
// policy in the in-process limiter, its estimate held under a lease, and
// settles it with the usage reported: the whole limiter work of a
// request.
func BenchmarkTokensHoldSettle(b *testing.B) {
	ctl := newBenchControl(b)
	addPolicy(b, ctl.fakeControl, policies.TypeTokens, policies.UnitRPH, policies.MaxValue, cond("workspace_id", testWS), "api_key")
	h := newHandler(b, ctl)
	r := newRequest("key-alice", []byte(chatBody), "X-Gateway-Provider", "openai")
	e := &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 9, CompletionTokens: 3, TotalTokens: 12}}
	ctx := context.Background()
	lim := ctl.Limiter()
	b.ReportAllocs()
	for b.Loop() {
		v, err := h.admit(r, nil)
		if err != nil || v == nil || v.refused != nil {
			b.Fatalf("admit: %+v, %v", v, err)
		}
		h.settle(ctx, lim, v.id, v.grants, e)
	}
}
