package routing

import (
	"context"
	"sync"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Session affinity (strategy.affinity on a loadbalance node): a session's
// requests go to the target its first request was balanced to, so the
// provider's prompt cache for its conversation stays warm. The pin is
// kept per node and session in a PinStore: a local map per instance in
// front of an optional shared store (Redis, through the llm app), which
// is asked once per session per instance per TTL. A pin moves only when
// its target is unhealthy: its breaker is open, or an attempt on it
// failed the way a breaker counts (unhealthy).

// Provider prompt-cache lifetimes, the default pin TTLs: a pin kept
// longer than the cache costs nothing (the session stays on one target),
// one dropped sooner moves a session away from a warm cache.
const (
	// cacheTTLShort: Anthropic's default (ephemeral) cache, also on
	// Bedrock and Vertex AI, lives 5 minutes from its last use; Gemini's
	// implicit cache documents no lifetime.
	cacheTTLShort = 5 * time.Minute
	// cacheTTLLong: OpenAI's (and Azure's) in-memory prompt cache stays
	// 5 to 10 minutes after its last use; self-hosted prefix caches
	// (vLLM, SGLang) evict by memory, not time.
	cacheTTLLong = 10 * time.Minute
	// MaxAffinityTTL bounds strategy.affinity.ttl (the schema's maximum).
	MaxAffinityTTL = 24 * time.Hour
)

// DefaultAffinityTTL is the pin TTL of a node whose affinity sets none:
// the longest prompt-cache lifetime among its targets' providers.
func DefaultAffinityTTL(n *Node) time.Duration {
	if t := n.Target; t != nil {
		switch t.Settings.Provider {
		case "anthropic", "bedrock", "vertex-ai", "google":
			return cacheTTLShort
		}
		return cacheTTLLong
	}
	var ttl time.Duration
	for _, c := range n.Children {
		ttl = max(ttl, DefaultAffinityTTL(c))
	}
	return ttl
}

// PinRemote is the store pins are shared through across replicas. Keys
// are the pin's hash; values are a child's index.
type PinRemote interface {
	// Pin makes cand the pin of key unless key holds a pin other than
	// old (-1: none is replaced), and returns the pin key holds
	// afterwards; either way the pin is kept for ttl from now.
	Pin(ctx context.Context, key uint64, old, cand int, ttl time.Duration) (int, error)
	// Drop removes key's pin if it is still child.
	Drop(ctx context.Context, key uint64, child int) error
}

// Bounds of the local pin map.
const (
	pinShards   = 16
	maxPins     = 1 << 18 // about 12 MiB of entries at most
	maxPerShard = maxPins / pinShards
)

// PinStore holds session pins: per instance, in front of an optional
// PinRemote. It is shared by every route of one Caddy through the llm
// app, so pins survive config reloads. A local hit takes one read lock
// and no allocation; the lock is never held across the remote call.
type PinStore struct {
	now    func() time.Time
	remote PinRemote
	shards [pinShards]pinShard
}

type pinShard struct {
	mu sync.RWMutex
	m  map[uint64]pinEntry
}

// pinEntry is one local pin. Until fresh it is used as is; until keep it
// is still the pin as far as this instance knows, but the remote store is
// asked again (and refreshes its own copy) before it is used. keep is
// twice the TTL, as the remote's copy lives: an active session never
// loses its pin because one replica's copy expired at the wrong moment.
type pinEntry struct {
	child       int32
	fresh, keep int64
}

// NewPinStore returns a store reading now for expiry, sharing pins
// through remote (nil: this instance only).
func NewPinStore(now func() time.Time, remote PinRemote) *PinStore {
	s := &PinStore{now: now, remote: remote}
	for i := range s.shards {
		s.shards[i].m = make(map[uint64]pinEntry)
	}
	return s
}

// Len returns the number of pins held locally.
func (s *PinStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}

func (s *PinStore) shard(key uint64) *pinShard { return &s.shards[key>>60] }

// local returns key's pin when it is fresh.
func (s *PinStore) local(key uint64, now int64) (int, bool) {
	sh := s.shard(key)
	sh.mu.RLock()
	e, ok := sh.m[key]
	sh.mu.RUnlock()
	if !ok || now >= e.fresh {
		return -1, false
	}
	return int(e.child), true
}

// pin settles key's pin, proposing cand and replacing old (-1: none):
// through the remote store when there is one (a failing remote leaves
// the decision to this instance), else locally. It returns the pin.
func (s *PinStore) pin(ctx context.Context, key uint64, old, cand int, ttl time.Duration) int {
	now := s.now().UnixNano()
	won := -1
	if s.remote != nil {
		if w, err := s.remote.Pin(ctx, key, old, cand, ttl); err == nil {
			won = w
		}
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if won < 0 {
		// Local only: the same rule as the remote's script.
		won = cand
		if e, ok := sh.m[key]; ok && now < e.keep && int(e.child) != old {
			won = int(e.child)
		}
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= maxPerShard {
		sh.evict(now)
	}
	sh.m[key] = pinEntry{child: int32(won), fresh: now + int64(ttl), keep: now + 2*int64(ttl)}
	return won
}

// evict makes room in a full shard, looking at no more than evictScan
// pins (map order is random enough): the expired among them go, or if
// none was, the first one seen. It runs with mu held.
func (sh *pinShard) evict(now int64) {
	seen, dropped := 0, false
	var first uint64
	for k, e := range sh.m {
		if seen == 0 {
			first = k
		}
		if now >= e.keep {
			delete(sh.m, k)
			dropped = true
		}
		if seen++; seen == evictScan {
			break
		}
	}
	if !dropped {
		delete(sh.m, first)
	}
}

// evictScan bounds the work of one eviction.
const evictScan = 64

// drop removes key's pin if it is still child, here and in the remote
// store, so no replica sends the session there again before re-pinning.
func (s *PinStore) drop(ctx context.Context, key uint64, child int) {
	sh := s.shard(key)
	sh.mu.Lock()
	if e, ok := sh.m[key]; ok && int(e.child) == child {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
	if s.remote != nil {
		_ = s.remote.Drop(ctx, key, child)
	}
}

// pinRun is a loadbalance node's affinity for one request.
type pinRun struct {
	ok  bool
	key uint64
	ttl time.Duration
}

// pinOf returns n's affinity for this request: none when the node has
// no affinity, the router no store, or the request no session.
func (r *run) pinOf(n *Node) pinRun {
	a := n.Strategy.Affinity
	if a == nil || r.rt.Pins == nil {
		return pinRun{}
	}
	if !r.sessionRead {
		r.session, r.sessionSrc = sessionOf(r.req)
		r.sessionRead = true
	}
	if r.sessionSrc == "" {
		return pinRun{}
	}
	ttl := time.Duration(a.TTL) * time.Second
	if ttl <= 0 {
		ttl = DefaultAffinityTTL(n)
	}
	return pinRun{ok: true, key: nodeKey(r.session, n), ttl: min(ttl, MaxAffinityTTL)}
}

// nodeKey mixes the session into a fingerprint of the node: its path and
// what its leaves reach (provider, host, virtual key, model override), so
// a pin means the same target on every replica and is void when the
// config's targets change.
func nodeKey(session uint64, n *Node) uint64 {
	return hashLeaves(fnvString(session, n.Path), n)
}

func hashLeaves(h uint64, n *Node) uint64 {
	if t := n.Target; t != nil {
		st := &t.Settings
		for _, v := range [...]string{st.Provider, st.CustomHost, t.VirtualKey, st.ResourceName, st.DeploymentID,
			st.CloudARegion, st.CloudBRegion, st.CloudCRegion, st.CloudCProjectID} {
			h = fnvString(h, v)
		}
		return fnvString(h, str(t.OverrideParams["model"]))
	}
	for _, c := range n.Children {
		h = hashLeaves(h, c)
	}
	return h
}

// usable reports whether child i of n may be sent the request.
func (r *run) usable(n *Node, i int, excluded *childSet) bool {
	return i >= 0 && i < len(n.Children) && n.Children[i].Weight > 0 && !excluded.has(i) && r.available(n.Children[i])
}

// pinnedPick returns the session's pinned child when it is usable, else
// balances as pick does and pins the result (unless another replica
// pinned a usable child first, which then wins).
func (r *run) pinnedPick(n *Node, excluded *childSet, p *pinRun) (int, error) {
	s := r.rt.Pins
	old, ok := s.local(p.key, s.now().UnixNano())
	if ok && r.usable(n, old, excluded) {
		return old, nil
	}
	if !ok {
		old = -1
	}
	cand, err := r.pick(n, excluded)
	if err != nil || cand < 0 {
		return cand, err
	}
	won := s.pin(r.ctx, p.key, old, cand, p.ttl)
	if won == cand || r.usable(n, won, excluded) {
		return won, nil
	}
	// Pinned elsewhere to a target this instance cannot use (its breaker
	// here is open): re-pin to ours.
	s.pin(r.ctx, p.key, won, cand, p.ttl)
	return cand, nil
}

// unhealthy reports whether an outcome says its target is unhealthy, so
// a session pinned to it moves: nothing was attempted (breaker open), the
// upstream timed out, could not be reached or broke off mid-stream,
// answered a server error, is overloaded, or its quota is spent. A rate
// limit, a refused request or a client that left keep the pin.
func unhealthy(o Outcome) bool {
	switch {
	case o.OK() || o.Cause == CauseClientGone || o.Cause == CauseLocal:
		return false
	case o.Skipped, o.Cause != CauseNone:
		return true
	}
	switch o.ErrorType {
	case providers.ErrOverloaded, providers.ErrQuotaExhausted:
		return true
	}
	return o.Status >= 500
}
