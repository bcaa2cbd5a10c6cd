package budgets

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// CodeExceeded is the error code of a request refused by an exhausted
// budget (status 412, as the reference answers).
const CodeExceeded = "budget_exceeded"

// keyPrefix starts every budget counter key, so budget and rate-limit
// counters never share a key in one limiter.
const keyPrefix = "budget|"

// nanoPrefix follows keyPrefix on the keys of cost counters, which count
// nano-dollars. Before, cost counters counted whole micro-dollars under
// keyPrefix alone; a counter in the new unit has a key of its own, so an
// instance of either version never reads the other's unit, and its
// first use carries the old count over (seed.go).
const nanoPrefix = "nano|"

// counterKey is the key of u's counter for the group key group in the
// period labelled label: nano-dollars for cost, tokens for tokens.
func counterKey(u *UsageLimit, group, label string) string {
	if u.Type == policies.TypeCost {
		return keyPrefix + nanoPrefix + group + "|" + label
	}
	return keyPrefix + group + "|" + label
}

// unitless is a counter key without its unit (nanoPrefix): the key as it
// was before cost counters counted nano-dollars, by which alerts are
// named and sent once, whatever the unit.
func unitless(key string) string {
	if rest, ok := strings.CutPrefix(key, keyPrefix+nanoPrefix); ok {
		return keyPrefix + rest
	}
	return key
}

// Source lists the active usage limits.
type Source interface {
	Active(ctx context.Context) ([]*UsageLimit, error)
}

// Enforcer admits requests against the active usage limits and settles
// them on completion.
type Enforcer struct {
	limiter policies.LeaseLimiter
	source  Source
	alerts  *Alerter
	now     func() time.Time
	// MaxWait bounds how long Admit waits for reservations in flight
	// (DefaultMaxWait; 0 refuses at once).
	MaxWait time.Duration
	// Lease bounds how long a reservation counts without being settled
	// (DefaultLease): a request whose instance died never settles, and
	// its reservation is given back by the next admission on the budget
	// once the lease has run out (policies.LeaseLimiter).
	Lease time.Duration
	// seed seeds empty counters: lost ones from the ledger, new
	// nano-dollar ones from the old micro-dollar counters (seed.go).
	seed *seeding
	// ids names reservations: a random prefix per enforcer and a
	// sequence number.
	idPrefix string
	idSeq    atomic.Uint64
}

// NewEnforcer returns an enforcer counting in limiter (the app's shared
// limiter: Redis for a cluster), reading limits from source, alerting
// through alerts (nil: no alerts) and telling time with now (nil:
// time.Now). A limiter that is not a policies.LeaseLimiter (both of
// package policies' are) holds reservations without leases.
func NewEnforcer(limiter policies.Limiter, source Source, alerts *Alerter, now func() time.Time) *Enforcer {
	if now == nil {
		now = time.Now
	}
	ll, ok := limiter.(policies.LeaseLimiter)
	if !ok {
		ll = newUnleased(limiter)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Enforcer{limiter: ll, source: source, alerts: alerts, now: now, MaxWait: DefaultMaxWait, Lease: DefaultLease,
		seed: newSeeding(now), idPrefix: hex.EncodeToString(b[:]) + "."}
}

// DefaultMaxWait is how long a request may wait for other requests'
// reservations on a budget to settle before it is refused.
const DefaultMaxWait = 10 * time.Second

// DefaultLease is how long a reservation counts unsettled before it is
// given back: longer than any request the gateway lets run, so only the
// reservations of requests that died with their instance expire.
const DefaultLease = 10 * time.Minute

// lease is Lease, or DefaultLease when unset.
func (e *Enforcer) lease() time.Duration {
	if e.Lease <= 0 {
		return DefaultLease
	}
	return e.Lease
}

// reserve admits want units on key under a new reservation id. When they
// do not fit but some budget remains, the remainder is reserved instead.
// When nothing remains but other requests hold unexpired reservations on
// the key (in flight, on any instance), it waits for them to settle, up
// to MaxWait: their unused reservations come back, and refusing now would
// refuse on estimates rather than spend (the pre-filled budget that
// answers "exhausted" with money left). Every attempt first gives back
// the reservations whose lease ran out. want is set to what was reserved.
func (e *Enforcer) reserve(ctx context.Context, key string, limit int64, window time.Duration, want *int64) (policies.Decision, string, error) {
	asked := *want
	*want = 0
	id := e.idPrefix + strconv.FormatUint(e.idSeq.Add(1), 36)
	deadline := e.now().Add(e.MaxWait)
	pause := 2 * time.Millisecond
	for {
		// Reserving and holding are one atomic step, so a request refused
		// meanwhile either sees the units taken or nothing at all, and a
		// refused request holds nothing: waiters do not wait for each
		// other.
		r, err := e.limiter.Reserve(ctx, key, limit, window, asked, id, e.lease())
		if err == nil && r.Allowed {
			*want = r.Reserved
			return r.Decision, id, nil
		}
		if err != nil || r.Held <= 0 || !e.now().Before(deadline) {
			return r.Decision, id, err
		}
		select {
		case <-ctx.Done():
			return r.Decision, id, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Grant is one usage limit's reservation for a request.
type Grant struct {
	Limit  *UsageLimit
	Key    string
	Period Period
	// ID names the reservation in the limiter (its lease).
	ID string
	// Reserved is what was reserved, in the limit's counter unit
	// (nano-dollars or tokens).
	Reserved int64
	At       time.Time
	Decision policies.Decision
}

// Admission is a request's reservations, settled once by Settle.
type Admission struct {
	e      *Enforcer
	Grants []Grant
}

// Reserve is what a request may use, as the rate limiter estimates it:
// nano-dollars at the model's price (0 when unpriced) and tokens.
type Reserve struct {
	NanoUSD, Tokens int64
}

// Admit reserves r on every active limit that matches a (whose
// attributes must all be filled). A reservation never exceeds what
// remains of a budget: when the full reservation does not fit but some
// budget is left, the remainder is reserved instead (the request is then
// charged what it really used at settlement, at most one request past
// the limit), so a nearly spent budget is not refused early by an
// estimate. When a budget is spent, every reservation made is given back
// and the 412 naming the limit is returned. A nil enforcer admits all.
func (e *Enforcer) Admit(ctx context.Context, a *policies.Attributes, r Reserve) (*Admission, *apierror.Error, error) {
	if e == nil {
		return nil, nil, nil
	}
	limits, err := e.source.Active(ctx)
	if err != nil || len(limits) == 0 {
		return nil, nil, err
	}
	var adm *Admission
	now := e.now()
	for _, u := range limits {
		p := u.Policy()
		if p == nil || !p.Matches(a) {
			continue
		}
		if adm == nil {
			adm = &Admission{e: e}
		}
		per := u.PeriodAt(now)
		group := p.GroupKey(a)
		g := Grant{Limit: u, Key: counterKey(u, group, per.Label), Period: per, At: now}
		if err := e.reseed(ctx, u, a, group, g.Key, per, now); err != nil {
			adm.refund(ctx)
			return nil, nil, err
		}
		want := r.NanoUSD
		if u.Type == policies.TypeTokens {
			want = r.Tokens
		}
		limit, window := u.Limit(), per.window()
		want = min(want, limit)
		d, id, err := e.reserve(ctx, g.Key, limit, window, &want)
		if err != nil {
			adm.refund(ctx)
			return nil, nil, err
		}
		g.Decision = d
		if !d.Allowed {
			adm.refund(ctx)
			return nil, exceeded(u, per), nil
		}
		g.Reserved, g.ID = want, id
		adm.Grants = append(adm.Grants, g)
	}
	return adm, nil, nil
}

// exceeded is the 412 of a spent budget.
func exceeded(u *UsageLimit, per Period) *apierror.Error {
	name := u.ID
	if u.Name != nil && *u.Name != "" {
		name = *u.Name + " (" + u.ID + ")"
	}
	msg := "usage limit " + name + " is exhausted"
	if !per.End.IsZero() {
		msg += "; it resets at " + per.End.UTC().Format(time.RFC3339)
	}
	return apierror.New(http.StatusPreconditionFailed, apierror.TypeRateLimit, msg).WithCode(CodeExceeded)
}

// refund gives back every reservation of a request that is not going
// ahead.
func (adm *Admission) refund(ctx context.Context) {
	if adm == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for i := range adm.Grants {
		g := &adm.Grants[i]
		if g.Reserved > 0 {
			_, _ = adm.e.limiter.Settle(ctx, g.Key, g.Limit.Limit(), g.Period.window(), g.ID, g.Reserved, 0, true)
		}
	}
	adm.Grants = nil
}

// Refund gives back the reservations of a request refused later in
// admission (by a rate limit).
func (adm *Admission) Refund(ctx context.Context) { adm.refund(ctx) }

// settleTimeout bounds a settlement's limiter calls.
const settleTimeout = 2 * time.Second

// Settle charges what the finished request e used in place of its
// reservations (policies.SettleDelta, as the rate limiter settles), then
// fires each limit's alert the first time its period's spend reaches the
// alert threshold. An outcome that does not say what was used keeps the
// reservation as the charge; a run of a batch line that another run
// already charged (observe.Entry.ChargeDuplicate) is charged nothing.
func (adm *Admission) Settle(ctx context.Context, e *observe.Entry) error {
	if adm == nil || len(adm.Grants) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	tokens, tokensKnown := UsedTokens(e)
	spent, spentKnown := UsedNanoUSD(e)
	if e != nil && e.ChargeDuplicate {
		// A batch line another run of it already charged: this run's
		// reservation is given back whole.
		tokens, tokensKnown, spent, spentKnown = 0, true, 0, true
	}
	now := adm.e.now()
	var errs []error
	for i := range adm.Grants {
		g := &adm.Grants[i]
		u := g.Limit
		used, known := spent, spentKnown
		if u.Type == policies.TypeTokens {
			used, known = tokens, tokensKnown
		}
		if !known {
			used = g.Reserved
		}
		// The charge and the end of the reservation's lease are one
		// atomic step: a reservation already given back by its lease's
		// expiry is charged what was used in full, never refunded twice.
		refundable := now.Sub(g.At) < g.Period.window() // as policies.SettleDelta
		if g.Reserved > 0 || used > 0 {
			if _, err := adm.e.limiter.Settle(ctx, g.Key, u.Limit(), g.Period.window(), g.ID, g.Reserved, used, refundable); err != nil {
				errs = append(errs, err)
			}
		}
		adm.e.checkAlert(ctx, g)
	}
	adm.Grants = nil
	return errors.Join(errs...)
}

// Spent returns what key has used of u in its period, reservations of
// requests in flight included: what the counter holds, which is more
// than the limit when the last requests cost more than they reserved
// (a report shows the overshoot rather than hide it at the limit).
func (e *Enforcer) Spent(ctx context.Context, u *UsageLimit, key string, per Period) (int64, error) {
	return e.count(ctx, key, u.Limit(), per.window())
}

// count is what key holds in units of a limit of limit. A report
// reserves nothing but gives back expired reservations first, so what it
// shows holds no dead instance's reservation.
func (e *Enforcer) count(ctx context.Context, key string, limit int64, window time.Duration) (int64, error) {
	r, err := e.limiter.Reserve(ctx, key, limit, window, 0, "", e.lease())
	if err != nil {
		return 0, err
	}
	return max(r.Used, limit-r.Remaining), nil
}

// checkAlert fires g's limit's alert when its period's spend has reached
// the threshold.
func (e *Enforcer) checkAlert(ctx context.Context, g *Grant) {
	at := g.Limit.AlertAt()
	if at == 0 || e.alerts == nil {
		return
	}
	spent, err := e.Spent(ctx, g.Limit, g.Key, g.Period)
	if err != nil || spent < at {
		return
	}
	e.alerts.Fire(ctx, g, spent)
}

// Enabled reports whether any usage limit is active, so admission can
// skip the work of describing a request when none is.
func (e *Enforcer) Enabled(ctx context.Context) bool {
	if e == nil {
		return false
	}
	limits, err := e.source.Active(ctx)
	return err != nil || len(limits) > 0
}
