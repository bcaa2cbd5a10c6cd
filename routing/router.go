package routing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Cause says why an attempt failed when the gateway, not the provider,
// made the failure. Retries, fallbacks and breakers treat causes
// differently from provider statuses.
type Cause uint8

// Causes of an outcome.
const (
	// CauseNone: the provider answered (successfully or not).
	CauseNone Cause = iota
	// CauseTimeout: the per-attempt request timeout fired (a 408).
	CauseTimeout
	// CauseUnreachable: the upstream could not be connected to (a 502).
	CauseUnreachable
	// CauseLocal: the gateway refused the attempt before sending it
	// (missing credentials, a blocked custom host). The upstream's health
	// is unknown, so breakers ignore it.
	CauseLocal
	// CauseClientGone: the client went away; nothing more is sent.
	CauseClientGone
	// CauseStreamFailed: a stream failed after bytes reached the client.
	CauseStreamFailed
)

// Outcome is what one attempt (or a whole subtree) produced, as far as
// routing decisions need to know.
type Outcome struct {
	// Status is the provider's status, or the gateway's own for failures
	// it synthesised (408 timeout, 502 unreachable, 503 breaker open).
	Status int
	// Committed is true once response bytes reached the client: from then
	// on nothing may be retried or fallen back from.
	Committed bool
	// Cause is set when the gateway made the failure itself.
	Cause Cause
	// RetryAfter is the wait the failed response asked for in its
	// retry-after-ms, x-ms-retry-after-ms or retry-after header, when
	// HasRetryAfter is true.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Cached is true when the answer came from the response cache.
	Cached bool
	// Skipped is true when nothing was attempted because every candidate
	// target's circuit breaker was open.
	Skipped bool
	// FirstByte is how long after the attempt started the first byte of
	// the answer arrived (0 when none did, or the gateway answered), the
	// sample least_latency averages.
	FirstByte time.Duration
	// ErrorType is the class of a provider's error answer (empty for
	// successes, the gateway's own failures and answers of no class),
	// which strategy.on_error_types falls back on.
	ErrorType providers.ErrorClass
	// Result is the executor's own account of the attempt (its held
	// answer, usage, model, …). The router never reads it; it carries it
	// back to the caller of Run with the outcome that ended the request,
	// so nothing has to be reconciled from side channels afterwards.
	Result any

	// step is 1 + the index of the Step that produced the outcome, so a
	// strategy moving on can relabel it; 0 when none did.
	step int
}

// OK reports whether the outcome is a success.
func (o Outcome) OK() bool { return o.Status >= 200 && o.Status < 300 }

// Executor is the data plane the router drives for each leaf target. The
// router knows nothing of HTTP bodies or providers.
type Executor interface {
	// Cached answers t from the response cache. It returns false on a
	// miss, or when t has no cache, after noting the cache status.
	Cached(ctx context.Context, t *Target) (Outcome, bool)
	// Attempt sends one attempt to t; try is 0 for the first attempt and
	// counts the retries after it.
	Attempt(ctx context.Context, t *Target, try int) Outcome
}

// Breakers are the circuit breakers of the targets. BreakerSet is the
// implementation; tests may substitute their own.
type Breakers interface {
	// Allow reports whether an attempt may be sent to t. When it may, done
	// must be called with the attempt's outcome.
	Allow(t *Target) (done func(Outcome), ok bool)
	// Open reports, without changing any state, whether t's breaker would
	// refuse an attempt now.
	Open(t *Target) bool
}

// Request is what strategies may look at: conditional routing reads the
// metadata, the request body (params) and the URL path.
type Request struct {
	Metadata map[string]string
	// MetadataRaw is the metadata header's JSON, read for nested keys
	// (metadata.user.plan).
	MetadataRaw string
	Params      []byte
	Path        string
	// Session is the x-gateway-session-id header, the first session key
	// affinity reads (session.go).
	Session string
	// Scope is the caller's workspace: session keys are hashed within
	// it, so two tenants sending the same session id never share a pin.
	Scope string
}

// Step outcomes, logged per attempt so an operator can see why a request
// ended where it did.
const (
	StepOK          = "ok"
	StepCacheHit    = "cache_hit"
	StepRetry       = "retry"
	StepFallback    = "fallback"
	StepBreakerOpen = "breaker_open"
	StepTimeout     = "timeout"
	StepUnreachable = "unreachable"
	// StepError is a failure that was the final answer.
	StepError = "error"
	// StepRetryAfterTooLong is a failure whose Retry-After wait exceeded
	// the retry budget, so it was not retried.
	StepRetryAfterTooLong = "retry_after_exceeds_budget"
	StepClientClosed      = "client_closed"
	StepStreamFailed      = "stream_failed"
	// StepContextWindow is a target passed over because the request's
	// input does not fit its model's context window (Target.Unfit).
	StepContextWindow = "context_window_exceeded"
)

// Step is one attempt (or a skipped target) of a request, for the log.
type Step struct {
	Target *Target
	// Try is 0 for a target's first attempt, then 1, 2… for its retries.
	Try      int
	Status   int // 0 when nothing was sent (breaker open)
	Duration time.Duration
	Outcome  string
}

// Result is what Run returns besides an error.
type Result struct {
	Outcome
	// Target is the leaf that produced Outcome (nil when none was tried).
	Target *Target
	// Retries is the number of retries made on Target.
	Retries int
	// Steps lists every attempt in order, including targets skipped
	// because their breaker was open.
	Steps []Step
}

// Retry and backoff defaults. The wait before retry n (0 for the first
// retry) is drawn uniformly from [0, min(BackoffCap, BackoffBase·2^n)):
// "full jitter", so clients retrying together spread out.
const (
	DefaultBackoffBase = 250 * time.Millisecond
	DefaultBackoffCap  = 8 * time.Second
	// DefaultRetryBudget bounds how long a request may spend waiting
	// between retries, counted from the start of routing; a wait that
	// would end after it (or after the request context's deadline, if
	// earlier) is not made and the failure is returned at once.
	DefaultRetryBudget = 60 * time.Second
)

// Router walks a Plan with the routing strategies, asking each leaf's
// cache, breaker and retry policy, and calling the Executor per attempt.
// A Router is safe for concurrent use; its fields are set once.
type Router struct {
	// Float returns a pseudo-random number in [0,1), used for weighted
	// load balancing and backoff jitter; tests replace it.
	Float func() float64
	// Breakers may be nil: no target then has a breaker.
	Breakers Breakers
	// Loads holds the measurements least_latency and least_inflight read
	// (every attempt is measured); nil measures nothing, and those modes
	// then draw by weight.
	Loads *LoadStats
	// Prices returns the price catalog cheapest reads; nil makes
	// cheapest draw by weight.
	Prices func() *cost.Catalog
	// Pins holds the session pins of loadbalance nodes with affinity
	// (affinity.go); nil makes affinity a no-op.
	Pins *PinStore
	// Now and Sleep are the clock; tests replace them. Sleep must return
	// early with ctx's error when ctx is done.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error

	BackoffBase time.Duration
	BackoffCap  time.Duration
	RetryBudget time.Duration
}

// NewRouter returns a Router with math/rand/v2, the real clock and the
// default backoff and budget.
func NewRouter() *Router {
	return &Router{
		Float:       rand.Float64,
		Now:         time.Now,
		Sleep:       SleepContext,
		BackoffBase: DefaultBackoffBase,
		BackoffCap:  DefaultBackoffCap,
		RetryBudget: DefaultRetryBudget,
	}
}

// run is the state of one Run.
type run struct {
	rt       *Router
	ctx      context.Context
	req      *Request
	exec     Executor
	res      Result
	deadline time.Time
	// open lists the paths of targets skipped because their breaker was
	// open, for the 503 that names them; unfit those passed over because
	// the request does not fit their context window.
	open  []string
	unfit []*Target
	// relabel is the index of a failed step the strategy moved on from,
	// marked as a fallback once a later target is actually tried.
	relabel int
	// session is the request's session key hash and its source, read
	// once by the first node with affinity (sessionRead).
	session     uint64
	sessionSrc  string
	sessionRead bool
}

// Run executes the plan. The error is an *apierror.Error for routing
// failures the client must see (a 400 for a conditional router that
// matched no target, a 503 when every candidate's breaker is open); the
// Result's Steps are filled either way.
func (rt *Router) Run(ctx context.Context, p *Plan, req *Request, exec Executor) (Result, error) {
	r := &run{rt: rt, ctx: ctx, req: req, exec: exec, relabel: -1}
	r.deadline = rt.Now().Add(rt.RetryBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(r.deadline) {
		r.deadline = d
	}
	o, err := r.node(p.Root)
	r.res.Outcome = o
	if err == nil && o.Skipped {
		err = r.skippedAll()
		if len(r.open) == 0 && len(r.unfit) > 0 {
			r.res.Outcome.ErrorType = providers.ErrContextLength
		}
	}
	return r.res, err
}

// skippedAll is the error of a request no target was tried for: a 503
// when a breaker was open (the same request may succeed later), else the
// 400 of a request too long for every target's context window.
func (r *run) skippedAll() error {
	if len(r.open) > 0 || len(r.unfit) == 0 {
		return apierror.Newf(http.StatusServiceUnavailable, apierror.TypeUnavailable,
			"every target's circuit breaker is open: %s", strings.Join(slices.Compact(r.open), ", ")).WithCode("circuit_open")
	}
	var b strings.Builder
	var tokens int64
	for i, t := range r.unfit {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s: %d)", t.Path, t.Unfit.Model, t.Unfit.Window)
		tokens = max(tokens, t.Unfit.Tokens)
	}
	// A count stops once it passes the largest window it is compared
	// with, so the figure is a floor.
	return apierror.Newf(http.StatusBadRequest, apierror.TypeInvalidRequest,
		"the request's input (at least %d tokens) exceeds the context window of every target: %s", tokens, b.String()).
		WithCode(string(providers.ErrContextLength))
}

func (r *run) node(n *Node) (Outcome, error) {
	if n.Target != nil {
		return r.leaf(n.Target), nil
	}
	switch n.Strategy.Mode {
	case ModeLoadBalance:
		return r.loadBalance(n)
	case ModeFallback:
		return r.fallback(n)
	case ModeConditional:
		child, err := selectConditional(n, r.req)
		if err != nil {
			return Outcome{}, err
		}
		return r.node(child)
	default: // single
		return r.node(n.Children[0])
	}
}

// fallback tries the children in order until one answers with a status
// that does not call for the next. Children whose breakers are all open
// are passed over; when every tried child failed, the last one's answer
// is the result.
func (r *run) fallback(n *Node) (Outcome, error) {
	var last Outcome
	tried := false
	for _, child := range n.Children {
		o, err := r.node(child)
		if err != nil || o.Committed {
			return o, err
		}
		if o.Skipped {
			continue
		}
		last, tried = o, true
		if !shouldFallback(n.Strategy, o) || r.ctx.Err() != nil {
			return o, nil
		}
		r.relabel = o.step - 1
	}
	if !tried {
		return Outcome{Status: http.StatusServiceUnavailable, Skipped: true}, nil
	}
	r.relabel = -1
	return last, nil
}

// shouldFallback: with on_status_codes or on_error_types, only an answer
// whose status or class is listed moves on (either list suffices);
// without either, any non-2xx does (timeouts and unreachable upstreams
// included, as their synthesised 408 and 502).
func shouldFallback(s *Strategy, o Outcome) bool {
	if len(s.OnStatusCodes) == 0 && len(s.OnErrorTypes) == 0 {
		return !o.OK()
	}
	if slices.Contains(s.OnStatusCodes, o.Status) {
		return true
	}
	return o.ErrorType != "" && !o.OK() && slices.Contains(s.OnErrorTypes, o.ErrorType)
}

// loadBalance sends the request to the child its balancing mode picks
// (balance.go) among those whose breakers are not all open. A child that
// turns out to be skipped (its breaker opened meanwhile) is excluded and
// another is picked.
func (r *run) loadBalance(n *Node) (Outcome, error) {
	excluded := newChildSet(len(n.Children))
	pin := r.pinOf(n)
	for {
		var child int
		var err error
		if pin.ok {
			child, err = r.pinnedPick(n, &excluded, &pin)
		} else {
			child, err = r.pick(n, &excluded)
		}
		if err != nil {
			return Outcome{}, err
		}
		if child < 0 {
			for i, c := range n.Children {
				if c.Weight > 0 && !excluded.has(i) {
					r.skipUnavailable(c)
				}
			}
			return Outcome{Status: http.StatusServiceUnavailable, Skipped: true}, nil
		}
		o, err := r.node(n.Children[child])
		if pin.ok && unhealthy(o) {
			// Re-pinned only when the target is unhealthy: the next
			// request (or the next pick below) draws a new one.
			r.rt.Pins.drop(r.ctx, pin.key, child)
		}
		if err != nil || !o.Skipped {
			return o, err
		}
		excluded.add(child)
	}
}

// available reports whether some leaf under n can be attempted: the
// request fits its context window and its breaker is not open.
func (r *run) available(n *Node) bool {
	if t := n.Target; t != nil {
		return t.Unfit == nil && (r.rt.Breakers == nil || t.CB == nil || !r.rt.Breakers.Open(t))
	}
	return slices.ContainsFunc(n.Children, r.available)
}

// skipUnavailable records every leaf under n that cannot be attempted
// as skipped, so the log and the error name them.
func (r *run) skipUnavailable(n *Node) {
	if t := n.Target; t != nil {
		switch {
		case t.Unfit != nil:
			r.skipUnfit(t)
		case r.rt.Breakers != nil && t.CB != nil && r.rt.Breakers.Open(t):
			r.skipped(t)
		}
		return
	}
	for _, c := range n.Children {
		r.skipUnavailable(c)
	}
}

// skipUnfit records a target passed over for its context window.
func (r *run) skipUnfit(t *Target) {
	r.unfit = append(r.unfit, t)
	r.res.Steps = append(r.res.Steps, Step{Target: t, Outcome: StepContextWindow})
}

func (r *run) skipped(t *Target) {
	r.open = append(r.open, t.Path)
	r.res.Steps = append(r.res.Steps, Step{Target: t, Outcome: StepBreakerOpen})
}

// selectConditional picks the target named by the first matching
// condition, else the default. Names and operators were checked when the
// plan was built, so errors here are only for plans built by hand.
func selectConditional(n *Node, req *Request) (*Node, error) {
	name := n.Strategy.Default
	for i, c := range n.Strategy.Conditions {
		ok, err := matchQuery(c.Query, req)
		if err != nil {
			return nil, apierror.BadRequest(n.Path+".strategy.conditions", "%s.strategy.conditions[%d].query: %v", n.Path, i, err)
		}
		if ok {
			name = c.Then
			break
		}
	}
	if child := childNamed(n, name); child != nil {
		return child, nil
	}
	if name == "" {
		return nil, apierror.BadRequest(n.Path+".strategy.default", "%s: no condition matched and the conditional strategy has no default", n.Path)
	}
	return nil, apierror.BadRequest(n.Path+".strategy", "%s: conditional routing names target %q, which no target of this node has", n.Path, name)
}

func childNamed(n *Node, name string) *Node {
	if name == "" {
		return nil
	}
	for _, child := range n.Children {
		if child.Name == name {
			return child
		}
	}
	return nil
}
