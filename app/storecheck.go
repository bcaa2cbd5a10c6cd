package app

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// storeProbeEvery is how often CheckStore asks Redis whether it answers;
// requests in between use the last answer, so the check costs at most one
// PING per second per instance, never one per request.
const storeProbeEvery = time.Second

// storeProbeTimeout bounds a probe: a Redis that does not answer in it is
// down for the purpose of a request that needs it.
const storeProbeTimeout = 500 * time.Millisecond

// storeProbe remembers the last probe of the shared store.
type storeProbe struct {
	mu   sync.Mutex
	at   time.Time
	up   bool
	busy bool
}

// CheckStore reports, before a provider is called, whether a request
// whose result must be stored can be: nil without Redis (Caddy storage is
// local) or while Redis answers, else a 503 naming the store (code
// store_unavailable). A stored Response calls it so that with Redis down
// (fail_open included) the request is refused before it is billed,
// instead of being billed and then lost. what names the record ("the
// response").
func (a *App) CheckStore(ctx context.Context, what string) *apierror.Error {
	if a.redis == nil || a.probe == nil {
		return nil
	}
	if a.storeUp(ctx) {
		return nil
	}
	return apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
		"the gateway's store (Redis) is unavailable, so "+what+" could not be stored; retry later, or send \"store\": false").
		WithCode("store_unavailable")
}

// storeUp returns the last probe's answer, probing again when it is older
// than storeProbeEvery. One caller probes while the others use the
// previous answer; the first caller waits for its own probe.
func (a *App) storeUp(ctx context.Context) bool {
	p := a.probe
	p.mu.Lock()
	if time.Since(p.at) < storeProbeEvery || (p.busy && !p.at.IsZero()) {
		up := p.up
		p.mu.Unlock()
		return up
	}
	p.busy = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeProbeTimeout)
	up := a.redis.Ping(ctx).Err() == nil
	cancel()
	p.mu.Lock()
	p.at, p.up, p.busy = time.Now(), up, false
	p.mu.Unlock()
	return up
}
