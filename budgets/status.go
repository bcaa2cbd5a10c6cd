package budgets

import (
	"context"
	"errors"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// errNotPrepared is StatusOf's answer for a limit Prepare has not built.
var errNotPrepared = errors.New("budgets: usage limit not prepared")

// Status is where one usage limit stands for one group, as the usage API
// and the response headers show it.
type Status struct {
	PolicyID    string   `json:"policy_id"`
	Name        *string  `json:"name"`
	Type        string   `json:"type"`
	CreditLimit float64  `json:"credit_limit"`
	Used        float64  `json:"used"`
	Remaining   float64  `json:"remaining"`
	Alert       *float64 `json:"alert_threshold"`
	Reset       string   `json:"periodic_reset"`
	// PeriodStart and PeriodEnd bound the current period (empty for a
	// limit that never resets).
	PeriodStart string `json:"period_start,omitempty"`
	PeriodEnd   string `json:"period_end,omitempty"`
}

// inUnit converts counter units to the limit's unit (dollars or tokens):
// a cost counter's nano-dollars are shown in dollars, as before.
func inUnit(u *UsageLimit, n int64) float64 {
	if u.Type == policies.TypeCost {
		return float64(n) / NanoPerUSD
	}
	return float64(n)
}

// Statuses returns where every active limit that applies to a request
// described by a stands (a's attributes that are not filled do not
// match: a usage view by key sees the limits on the key, workspace and
// organisation).
func (e *Enforcer) Statuses(ctx context.Context, a *policies.Attributes) ([]Status, error) {
	if e == nil {
		return nil, nil
	}
	limits, err := e.source.Active(ctx)
	if err != nil {
		return nil, err
	}
	out := []Status{}
	for _, u := range limits {
		p := u.Policy()
		if p == nil || !p.Matches(a) {
			continue
		}
		s, err := e.StatusOf(ctx, u, a)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// StatusOf returns where the group of u that a describes stands now,
// whether or not a meets u's conditions: a only needs the attributes u
// groups by. Statuses reports each limit through it, and so does the
// spend report (Report), so both read one counter the same way.
func (e *Enforcer) StatusOf(ctx context.Context, u *UsageLimit, a *policies.Attributes) (Status, error) {
	p := u.Policy()
	if p == nil {
		return Status{}, errNotPrepared
	}
	now := e.now()
	per := u.PeriodAt(now)
	group := p.GroupKey(a)
	key := counterKey(u, group, per.Label)
	// A report may be the first use of a counter in its period: it
	// carries the spend over first, as an admission would.
	if err := e.reseed(ctx, u, a, group, key, per, now); err != nil {
		return Status{}, err
	}
	spent, err := e.Spent(ctx, u, key, per)
	if err != nil {
		return Status{}, err
	}
	s := Status{PolicyID: u.ID, Name: u.Name, Type: u.Type, CreditLimit: u.CreditLimit, Used: inUnit(u, spent),
		Remaining: inUnit(u, max(u.Limit()-spent, 0)), Alert: u.AlertThreshold, Reset: u.PeriodicReset}
	if !per.End.IsZero() {
		s.PeriodStart, s.PeriodEnd = per.Start.Format(time.RFC3339), per.End.Format(time.RFC3339)
	}
	return s, nil
}

// Binding returns the grant with the least budget left after the
// request's reservation, for the response headers, or nil.
func (adm *Admission) Binding() *Grant {
	if adm == nil {
		return nil
	}
	var b *Grant
	for i := range adm.Grants {
		g := &adm.Grants[i]
		if b == nil || g.Decision.Remaining < b.Decision.Remaining {
			b = g
		}
	}
	return b
}

// RemainingText is g's remaining budget in the limit's unit, as a header
// value.
func (g *Grant) RemainingText() string {
	return formatFloat(inUnit(g.Limit, g.Decision.Remaining))
}
