// Package realtime relays WebSocket sessions of OpenAI's Realtime API
// between a client and a provider, and meters them: every response the
// provider reports done is billed through a Meter, which the gateway
// backs with its rate limits, usage limits (budgets), ledger and price
// catalog. The package knows nothing of routing or authentication; it
// gets two open sockets, the bounds that hold on them and the meter.
//
// The relay reads one message at a time from each side and writes it to
// the other before it reads the next, so a peer that does not read holds
// back the other side (TCP's own backpressure), never the gateway's
// memory; a write blocked longer than the write timeout ends the session.
package realtime

import (
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Defaults of Limits.
const (
	// DefaultMaxMessage is the largest message either side may send:
	// OpenAI takes audio appends of up to 15 MiB of base64, but clients
	// send chunks of tens of milliseconds; 4 MiB leaves room for a
	// second of 24 kHz PCM16 many times over.
	DefaultMaxMessage = 4 << 20
	// DefaultMaxSession is OpenAI's own session limit.
	DefaultMaxSession = 60 * time.Minute
	// DefaultIdle ends a session in which neither side sent anything.
	DefaultIdle = 5 * time.Minute
	// DefaultWriteTimeout is how long a write to a peer that does not
	// read may block before the session ends.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultMaxPerKey bounds the sockets one gateway key holds open.
	DefaultMaxPerKey = 32
)

// Limits bound a session. Zero fields take their defaults (Fill).
type Limits struct {
	// MaxMessage is the largest message, in bytes, either side may
	// send; a larger one closes the session with 1009.
	MaxMessage int64
	// MaxSession is the longest a session may last.
	MaxSession time.Duration
	// Idle ends a session after this long without a message.
	Idle time.Duration
	// WriteTimeout bounds one write to a peer that does not read.
	WriteTimeout time.Duration
	// MaxPerKey bounds the sessions one gateway key holds open at once,
	// on this instance; negative means no bound.
	MaxPerKey int
	// CloseDelay is how long sessions opened under a configuration may
	// outlive its replacement (a reload) before they are closed with
	// 1001; zero keeps them until they end (bounded by MaxSession).
	CloseDelay time.Duration
}

// Fill returns l with its zero fields set to their defaults.
func (l Limits) Fill() Limits {
	if l.MaxMessage <= 0 {
		l.MaxMessage = DefaultMaxMessage
	}
	if l.MaxSession <= 0 {
		l.MaxSession = DefaultMaxSession
	}
	if l.Idle <= 0 {
		l.Idle = DefaultIdle
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.MaxPerKey == 0 {
		l.MaxPerKey = DefaultMaxPerKey
	}
	return l
}

// Sockets counts the open sessions of each gateway key. One value is
// shared by every configuration of the process (Pool), so a reload does
// not reset the count of sockets still open.
type Sockets struct {
	mu  sync.Mutex
	per map[string]int
}

// Acquire counts one more session of key, unless key already holds max
// (max < 0: no bound). release gives it back; it is safe to call once.
func (s *Sockets) Acquire(key string, max int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max >= 0 && s.per[key] >= max {
		return nil, false
	}
	if s.per == nil {
		s.per = make(map[string]int)
	}
	s.per[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.per[key]--; s.per[key] <= 0 {
				delete(s.per, key)
			}
		})
	}, true
}

// Open returns the number of sessions key holds open.
func (s *Sockets) Open(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.per[key]
}

// Destruct implements caddy.Destructor.
func (*Sockets) Destruct() error { return nil }

// pool keeps the process's Sockets while any configuration uses it.
var pool = caddy.NewUsagePool()

const poolKey = "realtime.sockets"

// Pool returns the process's socket counts and the function that
// releases this configuration's use of them (call it in Cleanup).
func Pool() (*Sockets, func()) {
	v, _, _ := pool.LoadOrNew(poolKey, func() (caddy.Destructor, error) { return &Sockets{}, nil })
	return v.(*Sockets), func() { _, _ = pool.Delete(poolKey) }
}
