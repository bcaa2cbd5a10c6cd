package app

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// keyLimitsEvery is how often the usage limits set on API keys and
// virtual keys (their usage_limits field) are gathered again.
const keyLimitsEvery = 2 * time.Second

// budgetSource is what the budget enforcer enforces: the limits created
// through /v1/policies/usage-limits and those set on API keys and virtual
// keys created through the keys API.
type budgetSource struct {
	a    *App
	snap atomic.Pointer[keyLimitSnap]
	mu   sync.Mutex
}

type keyLimitSnap struct {
	at     time.Time
	limits []*budgets.UsageLimit
	// stored and merged cache the last merge with the store's set, so a
	// request allocates nothing while neither changes.
	stored []*budgets.UsageLimit
	merged []*budgets.UsageLimit
}

// Active implements budgets.Source.
func (s *budgetSource) Active(ctx context.Context) ([]*budgets.UsageLimit, error) {
	stored, err := s.a.budgetStore.Active(ctx)
	if err != nil {
		return nil, err
	}
	snap := s.keyLimits()
	if len(snap.limits) == 0 {
		return stored, nil
	}
	if m := snap.merged; m != nil && len(snap.stored) == len(stored) && (len(stored) == 0 || &snap.stored[0] == &stored[0]) {
		return m, nil
	}
	merged := append(append(make([]*budgets.UsageLimit, 0, len(stored)+len(snap.limits)), stored...), snap.limits...)
	next := *snap
	next.stored, next.merged = stored, merged
	s.snap.CompareAndSwap(snap, &next)
	return merged, nil
}

// keyLimits returns the limits of the key records, gathered again when
// older than keyLimitsEvery.
func (s *budgetSource) keyLimits() *keyLimitSnap {
	snap := s.snap.Load()
	if snap != nil && time.Since(snap.at) < keyLimitsEvery {
		return snap
	}
	if !s.mu.TryLock() {
		if snap != nil {
			return snap
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	next := &keyLimitSnap{at: time.Now(), limits: s.gather()}
	s.snap.Store(next)
	return next
}

// keyUsageLimits is the usage_limits field of an API key or virtual key.
type keyUsageLimits struct {
	Type           string   `json:"type"`
	CreditLimit    float64  `json:"credit_limit"`
	AlertThreshold *float64 `json:"alert_threshold"`
	PeriodicReset  string   `json:"periodic_reset"`
	Timezone       string   `json:"timezone"`
}

// gather builds a usage limit for every active key record that sets
// usage_limits: a limit on requests made with that API key (by its name,
// within its workspace) or through that virtual key (by its slug).
// Records whose usage_limits are not a valid limit are left out.
func (s *budgetSource) gather() []*budgets.UsageLimit {
	ks := s.a.KeyStore()
	if ks == nil {
		return nil
	}
	var out []*budgets.UsageLimit
	add := func(id, org, ws, key, value string, raw json.RawMessage) {
		var l keyUsageLimits
		if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &l) != nil || l.CreditLimit <= 0 {
			return
		}
		if l.Type == "" {
			l.Type = policies.TypeCost
		}
		u := &budgets.UsageLimit{ID: id, Type: l.Type, CreditLimit: l.CreditLimit, AlertThreshold: l.AlertThreshold,
			PeriodicReset: l.PeriodicReset, Timezone: l.Timezone, WorkspaceID: ws, OrganisationID: org,
			Conditions: []policies.Condition{{Key: key, Value: value}}, GroupBy: []policies.GroupBy{{Key: key}}}
		if u.Prepare() == nil {
			out = append(out, u)
		}
	}
	page, _, _ := ks.ListAPIKeys(func(r *keys.APIKey) bool {
		return len(r.UsageLimits) > 0 && r.Status == keys.StatusActive
	}, "", 0, budgets.MaxLimits)
	for _, r := range page {
		add("api_key:"+r.ID, r.OrganisationID, r.WorkspaceID, policies.KeyAPIKey, r.Name, r.UsageLimits)
	}
	for _, r := range ks.VirtualKeys(func(r *keys.VirtualKey) bool {
		return len(r.UsageLimits) > 0 && r.Status == keys.StatusActive
	}) {
		add("virtual_key:"+r.ID, r.OrganisationID, r.WorkspaceID, policies.KeyVirtualKey, r.Slug, r.UsageLimits)
	}
	return out
}
