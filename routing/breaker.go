package routing

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// Breaker registry tuning.
const (
	// BreakerIdleTTL is how long a closed breaker may go unused before it
	// is dropped; an open one is kept until its cooldown has passed.
	BreakerIdleTTL = time.Hour
	// breakerSweepEvery spaces the sweeps for idle breakers, which run
	// when a new breaker is created rather than on a timer goroutine.
	breakerSweepEvery = time.Minute
)

var (
	errBreakerFailure  = errors.New("failure")
	errBreakerExcluded = errors.New("excluded")
)

// BreakerSet holds one circuit breaker per target identity and breaker
// settings (see breakerKey), shared by every request, route and config of
// one Caddy. It is safe for concurrent use.
//
// Each breaker is a gobreaker TwoStepCircuitBreaker that counts
// consecutive failures and runs the half-open trial (one request at a
// time). gobreaker reads the wall clock and has no way to inject another,
// so the cooldown is kept here instead, on the set's clock: gobreaker's own
// open timeout is a nanosecond, and while the cooldown runs no request
// reaches gobreaker at all. Tests pass a fake clock to step over the 30 s
// minimum cooldown.
type BreakerSet struct {
	now    func() time.Time
	logger *zap.Logger

	mu        sync.RWMutex
	m         map[string]*breaker
	nextSweep time.Time
}

// NewBreakerSet returns an empty set reading now for cooldowns and
// idleness and logging state changes to logger (which may be nil).
func NewBreakerSet(now func() time.Time, logger *zap.Logger) *BreakerSet {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &BreakerSet{now: now, logger: logger, m: make(map[string]*breaker)}
}

type breaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	set      *BreakerSet
	cooldown time.Duration
	codes    []int
	provider string
	host     string
	fp       string
	// openUntil is when the cooldown ends, in the set clock's UnixNano;
	// 0 when the breaker is not open.
	openUntil atomic.Int64
	lastUsed  atomic.Int64
}

// breakerKey is the target's identity plus its breaker settings, so
// targets configured differently never share counts, and changing a
// config's cb_config starts afresh.
func breakerKey(t *Target) string {
	if t.breakerKey == "" {
		var b strings.Builder
		b.WriteString(t.Identity())
		b.WriteString("|cb:")
		b.WriteString(strconv.FormatFloat(t.CB.FailureThreshold, 'g', -1, 64))
		b.WriteByte('/')
		b.WriteString(strconv.FormatFloat(t.CB.CooldownInterval, 'g', -1, 64))
		for _, c := range t.CB.FailureStatusCodes {
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(c))
		}
		t.breakerKey = b.String()
	}
	return t.breakerKey
}

// Allow implements Breakers.
func (s *BreakerSet) Allow(t *Target) (func(Outcome), bool) {
	b := s.get(t, true)
	now := s.now()
	b.lastUsed.Store(now.UnixNano())
	if b.cooling(now) {
		return nil, false
	}
	done, err := b.cb.Allow()
	if err != nil { // open, or a half-open trial is already in flight
		return nil, false
	}
	return func(o Outcome) { done(b.result(o)) }, true
}

// Open implements Breakers.
func (s *BreakerSet) Open(t *Target) bool {
	b := s.get(t, false)
	if b == nil {
		return false
	}
	if b.cooling(s.now()) {
		return true
	}
	// After the cooldown gobreaker is half-open: available for one trial.
	return false
}

// State returns the state of t's breaker as "closed", "open" or
// "half-open"; a target with no breaker yet is closed.
func (s *BreakerSet) State(t *Target) string {
	b := s.get(t, false)
	switch {
	case b == nil:
		return gobreaker.StateClosed.String()
	case b.cooling(s.now()):
		return gobreaker.StateOpen.String()
	}
	st := b.cb.State()
	if st == gobreaker.StateOpen { // its nanosecond timeout has passed
		st = gobreaker.StateHalfOpen
	}
	return st.String()
}

// Len returns the number of breakers held.
func (s *BreakerSet) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

func (s *BreakerSet) get(t *Target, create bool) *breaker {
	key := breakerKey(t)
	s.mu.RLock()
	b := s.m[key]
	s.mu.RUnlock()
	if b != nil || !create {
		return b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b = s.m[key]; b == nil {
		now := s.now()
		s.sweep(now)
		b = s.newBreaker(t)
		b.lastUsed.Store(now.UnixNano())
		s.m[key] = b
	}
	return b
}

// sweep drops breakers that are closed and idle, at most once a minute.
// It runs with s.mu held.
func (s *BreakerSet) sweep(now time.Time) {
	if now.Before(s.nextSweep) {
		return
	}
	s.nextSweep = now.Add(breakerSweepEvery)
	idle := now.Add(-BreakerIdleTTL).UnixNano()
	for k, b := range s.m {
		if b.lastUsed.Load() < idle && !b.cooling(now) && b.cb.State() == gobreaker.StateClosed {
			delete(s.m, k)
		}
	}
}

func (s *BreakerSet) newBreaker(t *Target) *breaker {
	b := &breaker{
		set:      s,
		cooldown: time.Duration(t.CB.CooldownInterval * float64(time.Millisecond)),
		codes:    slices.Clone(t.CB.FailureStatusCodes),
		provider: t.Settings.Provider,
		host:     t.Host(),
		fp:       CredentialFingerprint(&t.Settings),
	}
	threshold := uint32(max(1, math.Ceil(t.CB.FailureThreshold)))
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        t.Settings.Provider + " " + b.host,
		MaxRequests: 1,
		Timeout:     time.Nanosecond,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			return err == nil
		},
		IsExcluded:    func(err error) bool { return errors.Is(err, errBreakerExcluded) },
		OnStateChange: b.stateChanged,
	})
	return b
}

// cooling reports whether the breaker is open and its cooldown runs.
func (b *breaker) cooling(now time.Time) bool {
	u := b.openUntil.Load()
	return u != 0 && now.UnixNano() < u
}

// stateChanged is gobreaker's callback, called with its lock held: it
// must not call back into the breaker.
func (b *breaker) stateChanged(_ string, from, to gobreaker.State) {
	observe.RecordBreakerTransition(b.provider, from.String(), to.String())
	now := b.set.now()
	switch to {
	case gobreaker.StateOpen:
		b.openUntil.Store(now.Add(b.cooldown).UnixNano())
	case gobreaker.StateClosed:
		b.openUntil.Store(0)
	}
	fields := []zap.Field{
		zap.String("provider", b.provider),
		zap.String("host", b.host),
		zap.String("credential_fingerprint", b.fp),
		zap.String("from", from.String()),
		zap.String("to", to.String()),
	}
	if to == gobreaker.StateOpen {
		fields = append(fields, zap.Duration("cooldown", b.cooldown))
	}
	b.set.logger.Info("circuit breaker state changed", fields...)
}

// result classifies an attempt for the breaker. Failures are the gateway's
// own timeouts and connection failures, and the statuses in
// failure_status_codes (default: any 5xx, and 429). Attempts the gateway
// refused before sending, and clients that went away, say nothing about
// the upstream and are not counted. A stream that reached the client is a
// success even if it later broke.
func (b *breaker) result(o Outcome) error {
	switch o.Cause {
	case CauseLocal, CauseClientGone:
		return errBreakerExcluded
	case CauseTimeout, CauseUnreachable:
		return errBreakerFailure
	}
	if o.Committed && o.OK() {
		return nil
	}
	if len(b.codes) > 0 {
		if slices.Contains(b.codes, o.Status) {
			return errBreakerFailure
		}
		return nil
	}
	if o.Status >= 500 || o.Status == 429 {
		return errBreakerFailure
	}
	return nil
}
