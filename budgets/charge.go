package budgets

import (
	"context"
	"errors"
	"slices"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Charge bills calls the gateway makes on behalf of an admitted request
// (the semantic cache's embedding calls) to the usage limits the request
// was admitted on, for the same groups and periods. It holds a copy of
// the request's grants, so it stays usable, from any goroutine, after the
// request's own reservations were settled.
type Charge struct {
	e      *Enforcer
	grants []Grant
}

// Charge returns the charge of adm's request; nil when no limit applied
// (a nil Charge charges nothing).
func (adm *Admission) Charge() *Charge {
	if adm == nil || len(adm.Grants) == 0 {
		return nil
	}
	return &Charge{e: adm.e, grants: slices.Clone(adm.Grants)}
}

// Add charges what the call e describes used (its cost on cost limits,
// its tokens on token limits) to every limit of c, as a settlement
// charges a request, and fires a limit's alert when the charge takes its
// period to the threshold. Nothing was reserved for the call, so nothing
// is given back, and a call whose use is unknown charges nothing. The
// money is spent: a charge is added even to a limit it takes past its
// credit.
func (c *Charge) Add(ctx context.Context, e *observe.Entry) error {
	if c == nil || e == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	tokens, tokensKnown := UsedTokens(e)
	spent, spentKnown := UsedNanoUSD(e)
	var errs []error
	for i := range c.grants {
		g := &c.grants[i]
		used, known := spent, spentKnown
		if g.Limit.Type == policies.TypeTokens {
			used, known = tokens, tokensKnown
		}
		if !known || used <= 0 {
			continue
		}
		if err := c.e.limiter.Adjust(ctx, g.Key, g.Limit.Limit(), g.Period.window(), used); err != nil {
			errs = append(errs, err)
			continue
		}
		c.e.checkAlert(ctx, g)
	}
	return errors.Join(errs...)
}
