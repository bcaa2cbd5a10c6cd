package routing

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Measurement tuning for the measured loadbalance modes (balance.go).
const (
	// latencyAlpha is the weight of a new time-to-first-byte sample in
	// its target's average when samples come close together.
	latencyAlpha = 0.1
	// latencyTau is the average's time constant: a sample arriving Δt
	// after the previous one weighs at least 1 − e^(−Δt/τ), so an
	// average nobody refreshed for a while is mostly replaced by the
	// next sample (a target back from a slow spell is seen as fast after
	// a few probes, not after hundreds of samples).
	latencyTau = 10 * time.Second
	// ProbeAfter is how long a target may go without a sample before
	// least_latency sends it one request to measure it again (one at a
	// time per target); a target never measured gets one at once.
	ProbeAfter = 10 * time.Second
	// maxLoads bounds the targets measured at once; LoadIdleTTL is how
	// long an unused measurement is kept.
	maxLoads    = 1 << 16
	LoadIdleTTL = time.Hour
	// loadSweepEvery spaces sweeps for idle measurements, run when a new
	// one is created, as the breakers' are.
	loadSweepEvery = time.Minute
)

// LoadStats holds what the measured balancing modes read, per target
// identity and model (loadKey): an average of the time to first byte and
// the count of attempts in flight. It is shared by every route of one
// Caddy through the llm app, so measurements survive config reloads, and
// stays per instance, as Envoy's least-request counts do. Reads and
// updates are atomic; the registry's lock is held only to look a target
// up or add it, never across an upstream call.
type LoadStats struct {
	now  func() time.Time
	seed maphash.Seed

	mu        sync.RWMutex
	m         map[uint64]*TargetLoad
	nextSweep time.Time
}

// NewLoadStats returns an empty registry reading now for sample ages,
// probes and idleness (tests pass a clock they move by hand).
func NewLoadStats(now func() time.Time) *LoadStats {
	return &LoadStats{now: now, seed: maphash.MakeSeed(), m: make(map[uint64]*TargetLoad)}
}

// TargetLoad is one target's measurements.
type TargetLoad struct {
	// ewma is the average time to first byte in nanoseconds, as float64
	// bits; 0 until the first sample.
	ewma atomic.Uint64
	// lastSample and probeAt are UnixNano times on the registry's clock:
	// the newest sample, and the last probe sent (ProbeAfter).
	lastSample atomic.Int64
	probeAt    atomic.Int64
	inflight   atomic.Int64
	lastUsed   atomic.Int64
}

// Latency returns the target's average time to first byte, 0 when it
// was never measured.
func (l *TargetLoad) Latency() time.Duration {
	return time.Duration(math.Float64frombits(l.ewma.Load()))
}

// Inflight returns the attempts to the target in flight now.
func (l *TargetLoad) Inflight() int64 { return l.inflight.Load() }

// observe adds a time-to-first-byte sample taken at now.
func (l *TargetLoad) observe(sample time.Duration, now int64) {
	s := float64(max(sample, 1))
	prev := l.lastSample.Swap(now)
	a := latencyAlpha
	if prev > 0 && now > prev {
		if w := 1 - math.Exp(-float64(now-prev)/float64(latencyTau)); w > a {
			a = w
		}
	}
	for {
		old := l.ewma.Load()
		next := s
		if old != 0 {
			avg := math.Float64frombits(old)
			next = avg + a*(s-avg)
		}
		if l.ewma.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// penalise records a failed attempt that took d: it counts as twice the
// current average or d, whichever is longer, so a target failing fast
// does not look fast.
func (l *TargetLoad) penalise(d time.Duration, now int64) {
	l.observe(max(d, 2*l.Latency()), now)
}

// probe reports whether a probe may be sent now, claiming it: at most one
// per target per ProbeAfter.
func (l *TargetLoad) probe(now int64) bool {
	p := l.probeAt.Load()
	if now-p < int64(ProbeAfter) {
		return false
	}
	return l.probeAt.CompareAndSwap(p, now)
}

// Len returns the number of targets measured.
func (s *LoadStats) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// Of returns t's measurements, creating them on first use. The lookup is
// cached on t, which belongs to one request.
func (s *LoadStats) Of(t *Target) *TargetLoad {
	if t.load != nil {
		return t.load
	}
	key := s.loadKey(t)
	s.mu.RLock()
	l := s.m[key]
	s.mu.RUnlock()
	if l == nil {
		l = s.add(key)
	}
	t.load = l
	return l
}

func (s *LoadStats) add(key uint64) *TargetLoad {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.m[key]; l != nil {
		return l
	}
	s.sweep(now, len(s.m) >= maxLoads)
	if len(s.m) >= maxLoads {
		// Full of targets in use: drop one that has nothing in flight
		// (map order is random enough) rather than grow without bound.
		for k, l := range s.m {
			if l.inflight.Load() == 0 {
				delete(s.m, k)
				break
			}
		}
	}
	l := new(TargetLoad)
	l.lastUsed.Store(now.UnixNano())
	s.m[key] = l
	return l
}

// sweep drops measurements unused for LoadIdleTTL (for a minute when the
// registry is full), at most once a minute unless full. It runs with
// s.mu held.
func (s *LoadStats) sweep(now time.Time, full bool) {
	if now.Before(s.nextSweep) && !full {
		return
	}
	s.nextSweep = now.Add(loadSweepEvery)
	ttl := LoadIdleTTL
	if full {
		ttl = loadSweepEvery
	}
	idle := now.Add(-ttl).UnixNano()
	for k, l := range s.m {
		if l.lastUsed.Load() < idle && l.inflight.Load() == 0 {
			delete(s.m, k)
		}
	}
}

// loadKey hashes what makes two targets the same upstream for
// measurements: the identity's parts (provider, host or location fields,
// credentials) and the model a target overrides, since one endpoint is
// as fast as the model it runs. Hashing the parts in place costs no
// allocation; the seed is the registry's, and a collision would only
// share two targets' measurements.
func (s *LoadStats) loadKey(t *Target) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	st := &t.Settings
	for i, v := range [...]string{st.Provider, st.CustomHost, st.ResourceName, st.DeploymentID, st.CloudARegion,
		st.CloudBRegion, st.CloudBEndpointName, st.CloudBDeploymentName, st.CloudCRegion, st.CloudCProjectID,
		st.APIKey, st.CloudAAccessKeyID, st.VendorOrganization, st.VendorProject} {
		if v != "" { // most are empty; the field's index keeps them apart
			h.WriteByte(byte(i))
			h.WriteString(v)
			h.WriteByte(0)
		}
	}
	if len(st.CloudCServiceAccountJSON) > 0 {
		h.WriteByte(100)
		h.Write(st.CloudCServiceAccountJSON)
	}
	if m := t.OverrideParams["model"]; len(m) > 0 {
		h.WriteByte(101)
		h.Write(m)
	}
	return h.Sum64()
}

// start counts an attempt to t as in flight; finish ends it.
func (s *LoadStats) start(t *Target) *TargetLoad {
	l := s.Of(t)
	l.inflight.Add(1)
	return l
}

// finish ends an attempt begun with start and records what it measured:
// a success's time to first byte, or a failure that says the upstream is
// unwell (a timeout, an unreachable upstream, a 5xx or 429) as a penalty.
// Failures the gateway made itself, client errors and cached answers say
// nothing about the upstream's speed.
func (s *LoadStats) finish(l *TargetLoad, o Outcome, took time.Duration) {
	l.inflight.Add(-1)
	now := s.now().UnixNano()
	l.lastUsed.Store(now)
	switch {
	case o.OK() && o.FirstByte > 0:
		l.observe(o.FirstByte, now)
	case o.Cause == CauseTimeout || o.Cause == CauseUnreachable:
		l.penalise(took, now)
	case o.Cause == CauseNone && !o.Committed && (o.Status >= 500 || o.Status == 429):
		l.penalise(took, now)
	}
}
