package budgets

import (
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Seeding counters. A budget's counters live in the shared limiter
// (Redis for a cluster), and two things can leave a counter empty while
// its period's spend is not:
//
//   - Redis lost it (a restart without persistence, a flush), and a spent
//     budget would start again from zero;
//   - it is new: cost counters count nano-dollars under keys of their own
//     (counterKey) where they counted whole micro-dollars before, so the
//     first gateway of this version in a fleet finds the period's spend
//     in the old counter.
//
// Each counter has a marker in the same store, set once the counter was
// seeded in its period. A counter whose marker is missing is raised to
// the most of what the ledger recorded for its group since the period (or
// the limit) began, in nano-dollars, and, for cost, of the old
// micro-dollar counter times 1,000; then the marker is set. Raising to a
// floor (policies.Raiser) is one atomic step that gives the same count
// whether one instance does it or several do at once, so instances that
// find the marker missing at the same moment all seed, and none takes the
// marker for a seed still under way. In-flight reservations at that
// moment are not added on top of the ledger's count, so a count rebuilt
// from the ledger may be low by at most what was in flight. During a
// rolling upgrade, what instances of the older version charge to the old
// counter after the new one was seeded is not carried over.

// Seeder reports what a group of a limit used between from and to, in
// the limit's counter unit (nano-dollars or tokens), and false when it
// cannot tell.
type Seeder interface {
	Used(ctx context.Context, u *UsageLimit, a *policies.Attributes, from, to time.Time) (int64, bool, error)
}

// seedCheckEvery is how often one instance looks at a counter's marker
// again; seedCacheMax bounds the counters it remembers.
const (
	seedCheckEvery = 10 * time.Second
	seedCacheMax   = 10000
)

// seedTimeout bounds one seed (the marker, the old counter, the ledger's
// query and the raise).
const seedTimeout = 10 * time.Second

// microToNano converts the old cost counters' micro-dollars.
const microToNano = NanoPerUSD / policies.MicroUSD

// seeding is an enforcer's seeding state.
type seeding struct {
	// seeder reads the ledger; nil: only old counters are carried over.
	seeder  Seeder
	marks   Markers
	mu      sync.Mutex
	checked map[string]*seedCheck
}

// seedCheck is one look at a counter's marker (and its seed when the
// marker was missing); requests arriving meanwhile wait for it, since a
// reservation counted before the seed would be absorbed by it.
type seedCheck struct {
	at   time.Time
	done chan struct{}
	err  error // set before done is closed
}

func newSeeding(now func() time.Time) *seeding {
	return &seeding{marks: NewMemoryOnce(now), checked: make(map[string]*seedCheck)}
}

// SetSeeder makes e rebuild lost counters from seeder (nil: no ledger;
// old micro-dollar counters are still carried over), with markers kept
// by marks (RedisOnce for a cluster; nil keeps this process's own).
func (e *Enforcer) SetSeeder(s Seeder, marks Markers) {
	next := newSeeding(e.now)
	next.seeder = s
	if marks != nil {
		next.marks = marks
	}
	e.seed = next
}

// begin returns key's check: the one made less than seedCheckEvery ago
// (or under way), or a new one that the caller is to make (mine).
func (s *seeding) begin(key string, now time.Time) (c *seedCheck, mine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.checked[key]; c != nil && now.Sub(c.at) < seedCheckEvery {
		return c, false
	}
	if len(s.checked) >= seedCacheMax {
		clear(s.checked) // checks under way are still closed by their makers
	}
	c = &seedCheck{at: now, done: make(chan struct{})}
	s.checked[key] = c
	return c, true
}

// end closes c with err; a failed check is forgotten, so the next use
// looks at the marker again.
func (s *seeding) end(key string, c *seedCheck, err error) {
	c.err = err
	if err != nil {
		s.mu.Lock()
		if s.checked[key] == c {
			delete(s.checked, key)
		}
		s.mu.Unlock()
	}
	close(c.done)
}

// reseed seeds u's counter key (counterKey of group in per) when its
// marker is missing, or waits for this instance's seed of it under way.
// It returns the limiter's and the marker store's errors; the ledger's
// are not (a counter is then seeded without it, as when the ledger
// cannot tell).
func (e *Enforcer) reseed(ctx context.Context, u *UsageLimit, a *policies.Attributes, group, key string, per Period, now time.Time) error {
	s := e.seed
	cost := u.Type == policies.TypeCost
	if s == nil || (s.seeder == nil && !cost) {
		return nil // nothing to seed a token counter from
	}
	c, mine := s.begin(key, now)
	if !mine {
		select {
		case <-c.done:
			return c.err
		default:
		}
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The requests waiting for the seed are not this one's client's: the
	// seed goes on if it leaves.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), seedTimeout)
	defer cancel()
	err := e.seedCounter(sctx, s, u, a, group, key, per, now)
	s.end(key, c, err)
	return err
}

// seedCounter raises key's counter to what its period used, unless its
// marker says it was seeded, and then sets the marker.
func (e *Enforcer) seedCounter(ctx context.Context, s *seeding, u *UsageLimit, a *policies.Attributes, group, key string, per Period, now time.Time) error {
	marker := "seed|" + key
	if done, err := s.marks.Marked(ctx, marker); err != nil || done {
		return err
	}
	var floor int64
	if u.Type == policies.TypeCost {
		old, err := e.count(ctx, keyPrefix+group+"|"+per.Label, legacyLimit(u), per.window())
		if err != nil {
			return err
		}
		floor = min(old, math.MaxInt64/microToNano) * microToNano
	}
	if s.seeder != nil {
		from := per.Start
		if u.CreatedAt.After(from) {
			from = u.CreatedAt
		}
		if used, ok, err := s.seeder.Used(ctx, u, a, from, now); err == nil && ok {
			floor = max(floor, used)
		}
	}
	if floor > 0 {
		if err := e.raise(ctx, key, u.Limit(), per.window(), floor); err != nil {
			return err
		}
	}
	_, err := s.marks.First(ctx, marker, per.window())
	return err
}

// legacyLimit is u's cost limit as the old counters counted it, in whole
// micro-dollars.
func legacyLimit(u *UsageLimit) int64 {
	return max(int64(math.Round(u.CreditLimit*policies.MicroUSD)), 1)
}

// raise raises key's count to floor in one atomic step
// (policies.Raiser); a limiter from outside package policies, which has
// no such step, is raised by what it lacks.
func (e *Enforcer) raise(ctx context.Context, key string, limit int64, window time.Duration, floor int64) error {
	if r, ok := e.limiter.(policies.Raiser); ok {
		_, err := r.Raise(ctx, key, limit, window, floor)
		return err
	}
	cur, err := e.count(ctx, key, limit, window)
	if err != nil || cur >= floor {
		return err
	}
	return e.limiter.Adjust(ctx, key, limit, window, floor-cur)
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
	return t.CostNanoUSD, true, nil
}
