package budgets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Bounds of the alert webhook: a call's time, and how many calls may be
// in flight (more are dropped and logged: an alert is advisory, and a slow
// receiver must not pile up goroutines).
const (
	AlertTimeout  = 5 * time.Second
	maxAlertCalls = 8
)

// Once reports whether this is the first call for key within ttl, across
// every instance that shares it.
type Once interface {
	First(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// RedisOnce is Once over a shared Redis (SET NX with an expiry). Prefix
// (the redis block's key_prefix) starts every key it writes, so fleets
// sharing one Redis never see each other's marks.
type RedisOnce struct {
	Client redis.UniversalClient
	Prefix string
}

// First implements Once.
func (o RedisOnce) First(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return o.Client.SetNX(ctx, o.Prefix+"llm:budget-once:"+key, 1, ttl).Result()
}

// MemoryOnce is Once within one process.
type MemoryOnce struct {
	mu   sync.Mutex
	seen map[string]time.Time
	now  func() time.Time
}

// NewMemoryOnce returns a MemoryOnce telling time with now (nil: time.Now).
func NewMemoryOnce(now func() time.Time) *MemoryOnce {
	if now == nil {
		now = time.Now
	}
	return &MemoryOnce{seen: make(map[string]time.Time), now: now}
}

// First implements Once. Expired keys are dropped as new ones arrive.
func (o *MemoryOnce) First(_ context.Context, key string, ttl time.Duration) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if until, ok := o.seen[key]; ok && now.Before(until) {
		return false, nil
	}
	for k, until := range o.seen {
		if !now.Before(until) {
			delete(o.seen, k)
		}
	}
	o.seen[key] = now.Add(ttl)
	return true, nil
}

// Alert is the body the webhook receives.
type Alert struct {
	Event          string   `json:"event"`
	PolicyID       string   `json:"policy_id"`
	Name           *string  `json:"name"`
	Type           string   `json:"type"`
	CreditLimit    float64  `json:"credit_limit"`
	AlertThreshold *float64 `json:"alert_threshold"`
	// Used is what the group used in the period, in the limit's unit.
	Used float64 `json:"used"`
	// Group is the counter's group (the limit id and its group_by values).
	Group       string `json:"group"`
	PeriodStart string `json:"period_start,omitempty"`
	PeriodEnd   string `json:"period_end,omitempty"`
	WorkspaceID string `json:"workspace_id"`
}

// Alerter posts one alert per limit, group and period to a webhook, the
// first time spend reaches the limit's alert threshold.
type Alerter struct {
	url      string
	client   *http.Client
	once     Once
	logger   *zap.Logger
	inflight atomic.Int32
	wg       sync.WaitGroup
}

// NewAlerter returns an alerter posting to url with client (which should
// be egress-checked: guardrails.NewEgressClient), deduplicated by once.
func NewAlerter(url string, client *http.Client, once Once, logger *zap.Logger) *Alerter {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Alerter{url: url, client: client, once: once, logger: logger}
}

// Fire posts g's alert unless it was already sent for its period.
func (a *Alerter) Fire(ctx context.Context, g *Grant, used int64) {
	ttl := g.Period.window()
	ok, err := a.once.First(ctx, "alert|"+g.Key, ttl)
	if err != nil || !ok {
		return
	}
	u := g.Limit
	body := Alert{Event: "usage_limit.alert_threshold", PolicyID: u.ID, Name: u.Name, Type: u.Type,
		CreditLimit: u.CreditLimit, AlertThreshold: u.AlertThreshold, Used: float64(used), Group: g.Key[len(keyPrefix):],
		WorkspaceID: u.WorkspaceID}
	if u.Type == policies.TypeCost {
		body.Used /= policies.MicroUSD
	}
	if !g.Period.End.IsZero() {
		body.PeriodStart, body.PeriodEnd = g.Period.Start.Format(time.RFC3339), g.Period.End.Format(time.RFC3339)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return
	}
	if a.inflight.Add(1) > maxAlertCalls {
		a.inflight.Add(-1)
		a.logger.Warn("usage limit alert dropped: too many alert calls in flight", zap.String("policy_id", u.ID))
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.inflight.Add(-1)
		ctx, cancel := context.WithTimeout(context.Background(), AlertTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(b))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err != nil {
			// The URL may hold the receiver's token: log the cause only.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			a.logger.Warn("usage limit alert webhook failed", zap.String("policy_id", u.ID), zap.Error(err))
			return
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			a.logger.Warn("usage limit alert webhook refused", zap.String("policy_id", u.ID), zap.Int("status", resp.StatusCode))
		}
	}()
}

// Wait waits for the alert calls in flight (tests, shutdown).
func (a *Alerter) Wait() { a.wg.Wait() }
