package app

import (
	"context"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/responses"
)

// responseSweepEvery is how often expired stored responses are deleted
// from Caddy storage (Redis expires its keys itself).
const responseSweepEvery = 6 * time.Hour

// responsesState is the app's store of Responses API answers made by
// translated targets.
type responsesState struct {
	// ResponsesRetention is how long stored responses are served
	// (default 30 days, as OpenAI keeps them).
	ResponsesRetention caddy.Duration `json:"responses_retention,omitempty"`

	responseStore *responses.Store
	stopSweep     context.CancelFunc
}

// provisionResponses opens the response store: in Redis when the app has
// one (keys expire with the retention), else in Caddy's storage. It runs
// after provisionShared.
func (a *App) provisionResponses() {
	cfg := responses.StoreConfig{Retention: time.Duration(a.ResponsesRetention)}
	if a.redis != nil {
		if p := a.RedisKeyPrefix(); p != "" {
			cfg.Prefix = p + "llm_gateway/responses"
		}
		a.responseStore = responses.NewStore(responses.NewRedisKV(a.redis, cfg.Retention), cfg)
		return
	}
	a.responseStore = responses.NewStore(a.storage, cfg)
}

// ResponseStore returns the store of responses made for translated
// targets (store defaults to true), scoped by workspace.
func (a *App) ResponseStore() *responses.Store { return a.responseStore }

// startResponseSweep deletes expired records from Caddy storage now and
// then, which, unlike Redis, keeps them forever otherwise.
func (a *App) startResponseSweep() {
	if a.redis != nil || a.responseStore == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopSweep = cancel
	store, logger := a.responseStore, a.logger
	go func() {
		t := time.NewTicker(responseSweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if n, err := store.Sweep(ctx); err != nil {
					logger.Warn("sweeping stored responses", zap.Error(err))
				} else if n > 0 {
					logger.Info("deleted expired stored responses", zap.Int("count", n))
				}
			}
		}
	}()
}

func (a *App) stopResponseSweep() {
	if a.stopSweep != nil {
		a.stopSweep()
		a.stopSweep = nil
	}
}
