package health

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Pinger is a shared store readiness can ask whether it answers. The
// Redis client and the ledger's database are wrapped in one.
type Pinger interface {
	Ping(ctx context.Context) error
}

// PingFunc adapts a function to Pinger.
type PingFunc func(ctx context.Context) error

// Ping calls f.
func (f PingFunc) Ping(ctx context.Context) error { return f(ctx) }

// store is one shared store readiness checks, by the name the probe's
// body gives it. fails is set for a store the operator named in fail_on:
// only such a store's failure makes the instance not ready; any other
// store that does not answer is reported as degraded while the instance
// stays ready.
type store struct {
	name  string
	p     Pinger
	fails bool
}

// result is one round of pings. Its bodies are built once per round, so
// answering a probe allocates nothing.
type result struct {
	at    time.Time
	ready bool
	// failing are the fail_on stores that did not answer (they make the
	// instance not ready); degraded are the other stores that did not.
	failing  []string
	degraded []string
	// errs are the stores' errors, for the transition log only: they may
	// name addresses, so they never reach a response.
	errs []error
	body []byte
}

// Bodies of the answers that do not depend on a round of pings.
var (
	bodyOK       = []byte(`{"status":"ok"}`)
	bodyDraining = []byte(`{"status":"not_ready","failing":["draining"]}`)
)

// notReadyBody is the 503 body naming the failing stores. The names are
// the package's own constants, so no escaping is needed.
func notReadyBody(failing []string) []byte {
	return []byte(`{"status":"not_ready","failing":["` + strings.Join(failing, `","`) + `"]}`)
}

// resultBody is the body of a round: ok, degraded (ready, naming the
// stores that do not answer), or not ready (naming the fail_on stores
// that do not, and the degraded ones too).
func resultBody(failing, degraded []string) []byte {
	switch {
	case len(failing) == 0 && len(degraded) == 0:
		return bodyOK
	case len(failing) == 0:
		return []byte(`{"status":"degraded","degraded":["` + strings.Join(degraded, `","`) + `"]}`)
	}
	b := notReadyBody(failing)
	if len(degraded) > 0 {
		b = append(b[:len(b)-1], `,"degraded":["`+strings.Join(degraded, `","`)+`"]}`...)
	}
	return b
}

// checker pings the stores at most once per ttl however many probes
// arrive: one probe refreshes, concurrent ones wait for that round (or
// their own request's end), and later ones read its result.
type checker struct {
	stores  []store
	timeout time.Duration
	ttl     time.Duration
	now     func() time.Time
	// onChange is called when a round's answer differs from the previous
	// round's (and for the first round that is not "ok"), so a store that
	// stays down is logged once, not on every round.
	onChange func(r *result)
	// observe, when set, is told each store's state after every round
	// (the llm_gateway_store_up gauge).
	observe func(name string, up bool)

	cur atomic.Pointer[result]

	mu       sync.Mutex
	inflight chan struct{} // non-nil while a round runs; closed when it ends
}

// check returns a result no older than ttl. ok is false only when ctx
// ended before the first round finished.
func (c *checker) check(ctx context.Context) (*result, bool) {
	if len(c.stores) == 0 {
		return &result{ready: true, body: bodyOK}, true
	}
	if r := c.cur.Load(); r != nil && c.now().Sub(r.at) < c.ttl {
		return r, true
	}
	c.mu.Lock()
	if r := c.cur.Load(); r != nil && c.now().Sub(r.at) < c.ttl {
		c.mu.Unlock()
		return r, true
	}
	wait := c.inflight
	if wait == nil {
		done := make(chan struct{})
		c.inflight = done
		c.mu.Unlock()
		// The round is not bound to this probe's request: a client that
		// hangs up must not leave a cancelled round in the cache.
		r := c.round()
		c.mu.Lock()
		c.inflight = nil
		c.mu.Unlock()
		close(done)
		return r, true
	}
	c.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
	}
	r := c.cur.Load()
	return r, r != nil
}

// round pings every store at once, each bounded by the timeout, and
// publishes the result.
func (c *checker) round() *result {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	errs := make([]error, len(c.stores))
	var wg sync.WaitGroup
	for i, s := range c.stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ping(ctx, s.p)
		}()
	}
	wg.Wait()
	r := &result{at: c.now(), errs: errs}
	for i, err := range errs {
		s := c.stores[i]
		if c.observe != nil {
			c.observe(s.name, err == nil)
		}
		switch {
		case err == nil:
		case s.fails:
			r.failing = append(r.failing, s.name)
		default:
			r.degraded = append(r.degraded, s.name)
		}
	}
	r.ready = len(r.failing) == 0
	r.body = resultBody(r.failing, r.degraded)
	prev := c.cur.Swap(r)
	if c.onChange != nil && ((prev == nil && len(r.errsNamed()) > 0) || (prev != nil && !bytes.Equal(prev.body, r.body))) {
		c.onChange(r)
	}
	return r
}

// errsNamed lists the stores of r that did not answer, failing first.
func (r *result) errsNamed() []string {
	return append(append([]string(nil), r.failing...), r.degraded...)
}

// ping asks p and gives up when ctx ends even if p does not honour it,
// so a store that hangs never holds a probe past the timeout.
func ping(ctx context.Context, p Pinger) error {
	done := make(chan error, 1)
	go func() { done <- p.Ping(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
