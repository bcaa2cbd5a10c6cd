package routing

import (
	"strconv"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// validatePlan checks what the schema cannot: that conditional strategies
// name targets that exist and use known operators, and that a loadbalance
// node has something to balance over. It runs when the plan is built, so
// a broken branch is reported even when this request would not reach it.
func validatePlan(n *Node) error {
	if n.Target != nil {
		return nil
	}
	if len(n.Strategy.OnErrorTypes) > 0 && n.Strategy.Mode != ModeFallback {
		return apierror.BadRequest(n.Path+".strategy.on_error_types",
			"%s.strategy.on_error_types: only a fallback strategy falls back on error types, and this one's mode is %q", n.Path, n.Strategy.Mode)
	}
	if n.Strategy.LoadBalance != "" && n.Strategy.Mode != ModeLoadBalance {
		return apierror.BadRequest(n.Path+".strategy.loadbalance",
			"%s.strategy.loadbalance: names how a loadbalance strategy picks, and this one's mode is %q", n.Path, n.Strategy.Mode)
	}
	if n.Strategy.Affinity != nil && n.Strategy.Mode != ModeLoadBalance {
		return apierror.BadRequest(n.Path+".strategy.affinity",
			"%s.strategy.affinity: keeps a session on one target of a loadbalance strategy, and this one's mode is %q", n.Path, n.Strategy.Mode)
	}
	switch n.Strategy.Mode {
	case ModeConditional:
		if err := validateConditional(n); err != nil {
			return err
		}
	case ModeLoadBalance:
		var total float64
		for _, c := range n.Children {
			total += max(c.Weight, 0)
		}
		if total <= 0 {
			return apierror.BadRequest(n.Path+".targets", "%s: loadbalance needs at least one target with a weight above 0", n.Path)
		}
	}
	for _, c := range n.Children {
		if err := validatePlan(c); err != nil {
			return err
		}
	}
	return nil
}

func validateConditional(n *Node) error {
	for i, c := range n.Strategy.Conditions {
		at := n.Path + ".strategy.conditions[" + strconv.Itoa(i) + "]"
		if err := validateQuery(c.Query); err != nil {
			return apierror.BadRequest(at+".query", "%s.query: %v", at, err)
		}
		if childNamed(n, c.Then) == nil {
			return apierror.BadRequest(at+".then", "%s.then names target %q, which no target of %s has (targets are named by their name field)", at, c.Then, n.Path)
		}
	}
	if d := n.Strategy.Default; d != "" && childNamed(n, d) == nil {
		return apierror.BadRequest(n.Path+".strategy.default", "%s.strategy.default names target %q, which no target of %s has", n.Path, d, n.Path)
	}
	return nil
}
