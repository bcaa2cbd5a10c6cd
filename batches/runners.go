package batches

import (
	"errors"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// ErrCallerRevoked is what a Runner returns, without running anything,
// when the gateway key that created the batch is no longer configured
// (removed or renamed by a reload). The engine then stops the batch: it
// fails with the code "api_key_revoked" and its remaining lines are not
// run, so a revoked key cannot keep spending through its batches.
var ErrCallerRevoked = errors.New("batches: the gateway key that created the batch is no longer configured")

// registration is one RegisterRunner call; its address tells it apart
// from another registration of the same runner value.
type registration struct{ r Runner }

// RegisterRunner makes r the runner of route until withdraw is called.
// Each llm_gateway route registers its pipeline under a key derived from
// its configuration, and a batch's lines run only through the runner of
// the route that created it (Caller.Route), so they reach only what that
// route's egress policy allows. A reload provisions the new config's
// routes before it cleans up the old ones: the new registration under the
// same key takes over, and the old one's withdraw leaves it in place.
// When a config fails to load, its withdraws bring back the registrations
// of the config still running.
func (e *Engine) RegisterRunner(route string, r Runner) (withdraw func()) {
	reg := &registration{r}
	e.mu.Lock()
	e.runners[route] = append(e.runners[route], reg)
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		regs := e.runners[route]
		for i, x := range regs {
			if x == reg {
				regs = append(regs[:i:i], regs[i+1:]...)
				break
			}
		}
		if len(regs) == 0 {
			delete(e.runners, route)
		} else {
			e.runners[route] = regs
		}
	}
}

// runnerFor returns the newest runner of route, nil when no route with
// that key is configured.
func (e *Engine) runnerFor(route string) Runner {
	e.mu.Lock()
	defer e.mu.Unlock()
	regs := e.runners[route]
	if route == "" || len(regs) == 0 {
		return nil
	}
	return regs[len(regs)-1].r
}

// Early ends of a batch, recorded in its errors and on each line not run.
var (
	abortRevoked = LineError{Code: "api_key_revoked",
		Message: "the gateway key that created the batch was removed from the configuration; the remaining requests were not run"}
	abortRoute = LineError{Code: "route_unavailable",
		Message: "the gateway route that created the batch is no longer configured (its llm_gateway block was changed or removed); the remaining requests were not run"}
)

func tooManyBatches(limit int) *apierror.Error {
	return apierror.Newf(http.StatusTooManyRequests, apierror.TypeRateLimit,
		"the gateway already has %d batches queued or running, its limit; retry when one has finished", limit).WithCode("too_many_batches")
}
