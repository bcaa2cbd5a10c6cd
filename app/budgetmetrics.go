package app

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets/budgetmetrics"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// budgetGroupsKey names, in gatewayPool, the process's one set of the
// groups usage limits were seen counting: kept across reloads, so the
// budget gauges do not wait for traffic again after each one.
const budgetGroupsKey = "llm.budget.groups"

type pooledGroups struct{ *budgetmetrics.Groups }

// Destruct has nothing to release.
func (pooledGroups) Destruct() error { return nil }

// budgetMetrics is the app's part of the budget gauges (package
// budgetmetrics): the groups seen, and their release.
type budgetMetrics struct {
	budgetGroups        *budgetmetrics.Groups
	releaseBudgetGroups func()
}

// provisionBudgetMetrics registers the budget gauges' collector, which
// reads this load's limits and enforcer when scraped, into the load's
// metrics registry. It runs after provisionBudgets.
func (a *App) provisionBudgetMetrics(ctx caddy.Context) error {
	v, _, err := gatewayPool.LoadOrNew(budgetGroupsKey, func() (caddy.Destructor, error) {
		return pooledGroups{budgetmetrics.NewGroups(budgetmetrics.MaxGroups)}, nil
	})
	if err != nil {
		return err
	}
	a.budgetGroups, a.releaseBudgetGroups = v.(pooledGroups).Groups, release(budgetGroupsKey)
	c := budgetmetrics.NewCollector(a.budgetGroups, a.budgets)
	logger := a.logger.Named("budgets")
	var warn logthrottle.Throttle
	c.OnError = func(err error) {
		if ok, held := warn.Allow(time.Now(), time.Minute); ok {
			logger.Warn("usage limits could not be read for the budget metrics; the scrape has none",
				zap.Error(err), zap.Int64("suppressed_since_last", held))
		}
	}
	if err := metricset.Replace(ctx.GetMetricsRegistry(), c); err != nil {
		return fmt.Errorf("registering the budget metrics: %v", err)
	}
	return nil
}

func (a *App) cleanupBudgetMetrics() {
	if a.releaseBudgetGroups != nil {
		a.releaseBudgetGroups()
		a.releaseBudgetGroups = nil
	}
}

// NoteBudgetGroups records the groups of the request described by attrs
// (filled in as for admission) under the usage limits that apply to it,
// for the budget gauges. Admission calls it for every request a limit
// applied to, admitted or refused.
func (a *App) NoteBudgetGroups(ctx context.Context, attrs *policies.Attributes) {
	if a.budgetGroups == nil {
		return
	}
	limits, err := a.budgets.Limits(ctx)
	if err != nil {
		return
	}
	a.budgetGroups.Note(limits, attrs)
}
