package budgets

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Rebuilding counters from the usage ledger. A budget's counters live in
// the shared limiter (Redis for a cluster); if Redis loses them (a
// restart without persistence, a flush), a spent budget would start
// again from zero. Each counter has a marker in the same store, set when
// the counter is first used in its period; a counter whose marker is
// missing is raised to what the ledger recorded for its group since the
// period (or the limit) began, once, by whichever instance sees it
// first. In-flight reservations at that moment are not added on top, so
// the rebuilt count may be low by at most what was in flight.

// Seeder reports what a group of a limit used between from and to, in
// the limit's counter unit, and false when it cannot tell.
type Seeder interface {
	Used(ctx context.Context, u *UsageLimit, a *policies.Attributes, from, to time.Time) (int64, bool, error)
}

// seedCheckEvery is how often one instance looks at a counter's marker
// again; seedCacheMax bounds the counters it remembers.
const (
	seedCheckEvery = 10 * time.Second
	seedCacheMax   = 10000
)

// seeding is an enforcer's rebuilding state.
type seeding struct {
	seeder  Seeder
	once    Once
	mu      sync.Mutex
	checked map[string]time.Time
}

// SetSeeder makes e rebuild lost counters from seeder, with markers kept
// by once (RedisOnce for a cluster).
func (e *Enforcer) SetSeeder(s Seeder, once Once) {
	e.seed = &seeding{seeder: s, once: once, checked: make(map[string]time.Time)}
}

// reseed raises key's counter to the ledger's count when its marker is
// missing. It looks at the marker at most every seedCheckEvery per key.
func (e *Enforcer) reseed(ctx context.Context, u *UsageLimit, a *policies.Attributes, key string, per Period, now time.Time) {
	s := e.seed
	if s == nil {
		return
	}
	s.mu.Lock()
	if t, ok := s.checked[key]; ok && now.Sub(t) < seedCheckEvery {
		s.mu.Unlock()
		return
	}
	if len(s.checked) >= seedCacheMax {
		clear(s.checked)
	}
	s.checked[key] = now
	s.mu.Unlock()
	first, err := s.once.First(ctx, "seed|"+key, per.window())
	if err != nil || !first {
		return
	}
	from := per.Start
	if u.CreatedAt.After(from) {
		from = u.CreatedAt
	}
	used, ok, err := s.seeder.Used(ctx, u, a, from, now)
	if err != nil || !ok || used <= 0 {
		return
	}
	cur, err := e.Spent(ctx, u, key, per)
	if err != nil || used <= cur {
		return
	}
	_ = e.limiter.Adjust(ctx, key, u.Limit(), per.window(), used-cur)
}

// LedgerSeeder is a Seeder reading the usage ledger.
type LedgerSeeder struct{ DB *ledger.DB }

// Used implements Seeder: the ledger's records of the limit's scope that
// meet its conditions and have the request's group_by values. A
// condition "*" on a key the limit does not group by cannot be
// expressed as a ledger filter: such limits are not rebuilt.
func (s LedgerSeeder) Used(ctx context.Context, u *UsageLimit, a *policies.Attributes, from, to time.Time) (int64, bool, error) {
	if s.DB == nil {
		return 0, false, nil
	}
	f := &ledger.Filter{Workspace: u.WorkspaceID, Organisation: u.OrganisationID, From: from, To: to}
	set := func(key, value string) bool {
		if value == "" {
			return false
		}
		switch {
		case key == policies.KeyAPIKey:
			// A key's name is unique within its workspace only (the
			// counter's group is workspace and name, Policy.GroupKey).
			f.APIKeys = []string{value}
			if a.WorkspaceID != "" {
				f.Workspace = a.WorkspaceID
			}
		case key == policies.KeyModel:
			f.Models = []string{value}
		case key == policies.KeyProvider:
			f.Providers = []string{value}
		case key == policies.KeyVirtualKey:
			f.VirtualKeys = []string{value}
		case key == policies.KeyConfigID:
			f.Configs = []string{value}
		case key == policies.KeyWorkspaceID:
			f.Workspace = value
		case key == policies.KeyOrganisationID:
			f.Organisation = value
		case strings.HasPrefix(key, policies.MetadataPrefix):
			k := key[len(policies.MetadataPrefix):]
			if !ledger.ValidMetadataKey(k) {
				return false
			}
			if f.Metadata == nil {
				f.Metadata = map[string]string{}
			}
			f.Metadata[k] = value
		default:
			return false
		}
		return true
	}
	grouped := map[string]bool{}
	for _, g := range u.GroupBy {
		v, _ := a.Get(g.Key)
		if !set(g.Key, v) {
			return 0, false, nil
		}
		grouped[g.Key] = true
	}
	for _, c := range u.Conditions {
		if c.Value == "*" {
			if !grouped[c.Key] {
				return 0, false, nil
			}
			continue
		}
		if !set(c.Key, c.Value) {
			return 0, false, nil
		}
	}
	if f.Workspace == "" && f.Organisation == "" {
		return 0, false, nil
	}
	_, t, err := s.DB.Series(ctx, f, 24*time.Hour)
	if err != nil {
		return 0, false, err
	}
	if u.Type == policies.TypeTokens {
		return t.InputTokens + t.OutputTokens, true, nil
	}
	// Nano-dollars to micro-dollars, rounded up as charges are.
	return (t.CostNanoUSD + 999) / 1000, true, nil
}
