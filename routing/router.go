package routing

import (
	"context"
	"math/rand/v2"
	"slices"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Outcome is what one attempt (or a whole subtree) produced, as far as
// routing decisions need to know.
type Outcome struct {
	// Status is the provider's status, or the gateway's own for failures
	// it synthesised (408 timeout, 502 unreachable).
	Status int
	// Committed is true once response bytes reached the client: from then
	// on nothing may be retried or fallen back from.
	Committed bool
}

// OK reports whether the outcome is a success.
func (o Outcome) OK() bool { return o.Status >= 200 && o.Status < 300 }

// AttemptFunc sends one attempt to a leaf target.
type AttemptFunc func(ctx context.Context, t *Target) Outcome

// Request is what strategies may look at: conditional routing reads the
// metadata, the request body (params) and the URL path.
type Request struct {
	Metadata map[string]string
	Params   []byte
	Path     string
}

// Router walks a Plan with the routing strategies. It knows nothing of
// HTTP bodies or providers: each leaf is handed to the attempt function.
type Router struct {
	// Float returns a pseudo-random number in [0,1); tests replace it.
	Float func() float64
}

// NewRouter returns a Router using math/rand/v2.
func NewRouter() *Router { return &Router{Float: rand.Float64} }

// Run executes the plan and returns the final outcome.
func (rt *Router) Run(ctx context.Context, p *Plan, req *Request, attempt AttemptFunc) (Outcome, error) {
	return rt.run(ctx, p.Root, req, attempt)
}

func (rt *Router) run(ctx context.Context, n *Node, req *Request, attempt AttemptFunc) (Outcome, error) {
	if n.Target != nil {
		return attempt(ctx, n.Target), nil
	}
	switch n.Strategy.Mode {
	case ModeLoadBalance:
		child, err := rt.pickWeighted(n)
		if err != nil {
			return Outcome{}, err
		}
		return rt.run(ctx, child, req, attempt)
	case ModeFallback:
		var last Outcome
		for i, child := range n.Children {
			o, err := rt.run(ctx, child, req, attempt)
			if err != nil {
				return o, err
			}
			last = o
			if o.Committed || !shouldFallback(n.Strategy.OnStatusCodes, o) || i == len(n.Children)-1 || ctx.Err() != nil {
				return o, nil
			}
		}
		return last, nil
	case ModeConditional:
		child, err := selectConditional(n, req)
		if err != nil {
			return Outcome{}, err
		}
		return rt.run(ctx, child, req, attempt)
	default: // single
		return rt.run(ctx, n.Children[0], req, attempt)
	}
}

// shouldFallback: with on_status_codes, only the listed statuses move on;
// without, any non-2xx does (timeouts and unreachable upstreams included,
// as their synthesised 408 and 502).
func shouldFallback(codes []int, o Outcome) bool {
	if len(codes) > 0 {
		return slices.Contains(codes, o.Status)
	}
	return !o.OK()
}

func (rt *Router) pickWeighted(n *Node) (*Node, error) {
	var total float64
	for _, c := range n.Children {
		total += c.Weight
	}
	if total <= 0 {
		return nil, apierror.BadRequest(n.Path+".targets", "%s: loadbalance needs at least one target with a weight above 0", n.Path)
	}
	r := rt.Float() * total
	for _, c := range n.Children {
		if c.Weight <= 0 {
			continue
		}
		if r < c.Weight {
			return c, nil
		}
		r -= c.Weight
	}
	for i := len(n.Children) - 1; i >= 0; i-- {
		if n.Children[i].Weight > 0 {
			return n.Children[i], nil
		}
	}
	return nil, apierror.BadRequest(n.Path+".targets", "%s: no target to balance over", n.Path)
}

// selectConditional picks the target named by the first matching
// condition, else the default.
func selectConditional(n *Node, req *Request) (*Node, error) {
	name := n.Strategy.Default
	for i, c := range n.Strategy.Conditions {
		ok, err := matchQuery(c.Query, req)
		if err != nil {
			return nil, apierror.BadRequest(n.Path+".strategy.conditions", "%s.strategy.conditions[%d]: %v", n.Path, i, err)
		}
		if ok {
			name = c.Then
			break
		}
	}
	for _, child := range n.Children {
		if child.Name == name && name != "" {
			return child, nil
		}
	}
	return nil, apierror.BadRequest(n.Path+".strategy", "%s: conditional routing names target %q, which no target of this node has", n.Path, name)
}
