package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/realtime"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// grant is one policy's admission of a request.
type grant struct {
	policy *policies.Policy
	key    string
	// cost is what was consumed: 1 for a requests policy, the token
	// reservation for a tokens policy.
	cost int64
	at   time.Time
	dec  policies.Decision
	// held says cost is held under the verdict's reservation id with a
	// lease (policies.Holder), so it is settled through Settle and comes
	// back after the lease when its instance dies before settling.
	held bool
}

// verdict is the outcome of admitting a request that matched at least one
// policy.
type verdict struct {
	// grants are the admissions made, in policy order. When refused is
	// set they have already been refunded and are kept for the headers.
	grants []grant
	// refused is the decision of the policy that refused, or nil.
	refused *grant
	// keyName and workspace are the caller's, for the log.
	keyName, workspace string
	// id names the request's held reservations (reservationID), made
	// when the first is held.
	id string
	// buf holds the grants of the usual one or two policies, so a verdict
	// is a single allocation.
	buf [2]grant
}

// errUnavailable is returned by admit when the limiter or the store failed
// and the gateway fails closed.
var errUnavailable = errors.New("ratelimit: limiter unavailable")

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// A realtime session's responses (and a Responses WebSocket's) pass
	// this stage one by one, as the gateway meters them: it needs the
	// stage's key, and a browser's
	// key sent as a subprotocol.
	realtimeSession := (r.URL.Path == "/v1/realtime" || r.URL.Path == "/v1/responses") && realtime.IsUpgrade(r)
	if realtimeSession {
		realtime.TakeSubprotocolKey(r.Header)
	}
	if app.MCPPath(r.URL.Path) {
		// An MCP message is not a model request: each tools/call in it
		// passes this stage on its own, with its server and tool, when
		// llm_mcp meters it (app.AdmitCall), so the message is handed
		// on uncounted with this stage's key.
		if iss, carries := h.ctl.(issuer); carries {
			st := handoff.New(iss.Issuer())
			st.SetAdmission(h.key)
			r = r.WithContext(handoff.With(r.Context(), st))
		}
		return next.ServeHTTP(w, r)
	}
	c := requester{h: h, r: r}
	v, charge, ok := h.decide(w, r, &c)
	if !ok {
		return nil
	}
	// The gateway stores which stage admitted a batch's creation, so its
	// lines pass the same one (see Admit).
	batch := r.Method == http.MethodPost && r.URL.Path == batchesPath
	if iss, carries := h.ctl.(issuer); carries && (c.id != nil || batch || realtimeSession) {
		// llm_gateway takes the caller found here rather than
		// authenticating the key a second time, and does not reserve the
		// request on its usage limits again. An unauthenticated request
		// carries no mark: the gateway answers it 401, or (no usage limit
		// needed the caller here) finds no limit to apply either.
		st := handoff.New(iss.Issuer())
		if c.id != nil {
			st.SetCaller(c.key, c.id)
			st.MarkBudgeted(charge)
		}
		if batch || realtimeSession {
			st.SetAdmission(h.key)
		}
		r = r.WithContext(handoff.With(r.Context(), st))
	}
	if v == nil {
		return next.ServeHTTP(w, r)
	}
	return next.ServeHTTP(newHeaderWriter(w, v), r)
}

// issuer vouches for the state handed on to the handlers after this one
// (*app.App implements it).
type issuer interface {
	Issuer() *handoff.Issuer
}

// requester is who made a request: authenticated at most once, when a
// policy or a usage limit first needs to know (a request no policy
// applies to is never authenticated here), or given (a batch line).
type requester struct {
	h    *Handler
	r    *http.Request
	key  string
	id   *identity.Caller
	done bool
}

// identity returns the caller's identity; false when its key is not
// valid (the gateway answers 401).
func (c *requester) identity() (*identity.Caller, bool) {
	if !c.done {
		c.done = true
		c.key = ingress.GatewayKey(c.r.Header)
		c.id, _ = c.h.ctl.Authenticate(c.key)
	}
	return c.id, c.id != nil
}

// batchesPath is where managed batches are created.
const batchesPath = "/v1/batches"

// Admit implements app.Admission: a managed batch line passes the same
// policies, counters and settlement as a client request on the route the
// batch was created on, as the batch's creator id.
func (h *Handler) Admit(w http.ResponseWriter, r *http.Request, id *identity.Caller) bool {
	_, charge, ok := h.decide(w, r, &requester{id: id, done: true})
	if st := handoff.From(r.Context()); ok && st != nil {
		// The run that asked (llm_gateway's clientless Run) handed id on
		// in r's state; the gateway then does not reserve r again.
		st.MarkBudgeted(charge)
	}
	return ok
}

// decide admits r, made by c. When r may not proceed it writes the 429
// or 503 to w and returns false; when it may, the verdict's headers are
// set on w and token settlement is registered on r. v is nil when no
// policy matched; charge is the usage-limit admission's (budget).
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, c *requester) (v *verdict, charge *budgets.Charge, ok bool) {
	v, err := h.admit(r, c)
	if err != nil {
		if r.Context().Err() != nil {
			return nil, nil, false // the client left while we asked the limiter
		}
		// The breaker lets one request probe the limiter every second.
		w.Header()[hdrRetryAfter] = []string{"1"}
		writeError(w, r, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
			"the rate limiter is unavailable; try again later").WithCode("rate_limiter_unavailable"))
		return nil, nil, false
	}
	if v != nil {
		setHeaders(w.Header(), v)
		if v.refused != nil {
			h.reject(w, r, v)
			return nil, nil, false
		}
	}
	charge, ok = h.admitBudget(w, r, c, v)
	if !ok {
		return nil, nil, false
	}
	if v == nil {
		return nil, charge, true
	}
	h.registerSettlement(r, v.id, v.grants)
	return v, charge, true
}

// request is the per-request state of matching: the attributes, of which
// those that cost something to learn (routing, metadata, and the model,
// which needs the body) are filled lazily, when a policy reads them.
type request struct {
	r *http.Request
	h *Handler
	// id is the caller, whose key's defaults route a request that names
	// no route of its own (ingress.Headers.ApplyDefaults), as llm_gateway
	// routes it.
	id    *identity.Caller
	attrs policies.Attributes
	// hdr are the gateway headers, parsed by ingress.Parse on first need;
	// nil when they are malformed (the gateway answers 400).
	hdr      *ingress.Headers
	hdrDone  bool
	bodyDone bool
	body     []byte
	// size is the body's size in bytes, known even when the body was too
	// large to read (from Content-Length or what was read).
	size int64
	// reservation is filled on the first tokens or cost policy (res).
	reservation reservation
}

// Results of request.match.
const (
	noMatch = iota
	isMatch
	needsBody
)

// maxCandidates is how many matching policies are tracked without a heap
// allocation; more still work, through append.
const maxCandidates = 8

// admit decides whether r may proceed. It returns nil, nil when no policy
// matches (or the request is not authenticated: the gateway answers 401),
// and errUnavailable when the limiter failed and the gateway fails closed.
// In the no-match case it reads no body and allocates nothing.
func (h *Handler) admit(r *http.Request, c *requester) (*verdict, error) {
	ctx := r.Context()
	var active []*policies.Policy
	if h.st.storeLoaded.Load() || !h.st.storeDown.failFast() {
		var err error
		if active, err = h.ctl.Policies().Active(ctx); err == nil {
			h.st.storeLoaded.Store(true)
		} else {
			// Only the first load of a store can fail (later failures
			// keep the previous set): no policy created through the API
			// is known yet. A request none of the Caddyfile's policies
			// applies to needs no store, whatever the fail mode (a
			// gateway started while Redis is unreachable answered 503 to
			// every request though no policy existed); one they apply to
			// needs its counters, which answer as the fail mode says.
			if ctx.Err() != nil {
				return nil, err
			}
			h.st.storeDown.failed()
			h.logFailure("rate-limit policy store unavailable; only the Caddyfile's policies are enforced until it answers", err)
			active = nil
		}
	}
	if len(active) == 0 && len(h.static) == 0 {
		return nil, nil
	}
	if h.ctl.ControlPlane().Owns(r.Method, r.URL.Path) {
		// The management APIs are never limited: a policy must not lock
		// its administrators out of the API that lifts it. Prompt
		// completions are inference and are limited like chat.
		return nil, nil
	}
	if c == nil {
		c = &requester{h: h, r: r}
	}
	id, ok := c.identity()
	if !ok {
		return nil, nil
	}
	q := request{r: r, h: h, id: id}
	q.attrs.WorkspaceID, q.attrs.OrganisationID, q.attrs.APIKey = id.WorkspaceID, id.OrganisationID, id.Name
	q.attrs.Pending = policies.PendingRouting | policies.PendingMetadata | policies.PendingModel

	var buf [maxCandidates]*policies.Policy
	cands := buf[:0]
	body := false
	for _, set := range [2][]*policies.Policy{h.static, active} {
		for _, p := range set {
			switch q.match(p) {
			case isMatch:
				cands = append(cands, p)
			case needsBody:
				cands, body = append(cands, p), true
			}
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	if body {
		h.readBody(&q)
		kept := cands[:0]
		for _, p := range cands {
			if q.match(p) == isMatch {
				kept = append(kept, p)
			}
		}
		if cands = kept; len(cands) == 0 {
			return nil, nil
		}
	}
	return h.consume(ctx, &q, cands)
}

// match reports whether p applies to the request, or that it cannot tell
// before the body is read: p tests or groups by the model, or counts
// tokens (which needs the estimate). The rules are policies.Policy.Match;
// this only fills what it asks for.
func (q *request) match(p *policies.Policy) int {
	for {
		ok, need := p.Match(&q.attrs)
		if need == 0 {
			if !ok {
				return noMatch
			}
			if !q.bodyDone && (p.CountsUsage() || p.Needs()&policies.PendingModel != 0) {
				return needsBody
			}
			return isMatch
		}
		if need&^policies.PendingModel == 0 {
			return needsBody // the body is read once every policy was seen
		}
		q.fill(need &^ policies.PendingModel)
	}
}

// fill fills the attribute groups in need (not the model: readBody does).
func (q *request) fill(need policies.Pending) {
	a := &q.attrs
	need &= a.Pending &^ policies.PendingModel
	if need == 0 {
		return
	}
	a.Pending &^= need
	hdr := q.headers()
	if hdr == nil {
		return
	}
	if need&policies.PendingMetadata != 0 {
		a.Metadata = hdr.Metadata
	}
	if need&policies.PendingRouting != 0 {
		d := routing.DestinationOf(hdr, q.h.ctl, q.h.configs)
		a.Provider, a.VirtualKey, a.ConfigID = d.Provider, d.VirtualKey, d.ConfigID
	}
}

// headers parses the gateway headers as llm_gateway does, once, and
// applies the caller's key's defaults to them as llm_gateway does: a
// request routed by its key's default virtual key or config is then
// matched and priced by that route, not as one without a provider.
func (q *request) headers() *ingress.Headers {
	if !q.hdrDone {
		q.hdrDone = true
		if hdr, err := ingress.Parse(q.r.Header); err == nil {
			if q.id != nil {
				hdr.ApplyDefaults(q.id.Defaults)
			}
			q.hdr = hdr
		}
	}
	return q.hdr
}

// consume admits the request against every matched policy, all or
// nothing: when one refuses (or the limiter fails) the units already taken
// by the others are given back.
func (h *Handler) consume(ctx context.Context, q *request, cands []*policies.Policy) (*verdict, error) {
	lim := h.ctl.Limiter()
	v := new(verdict)
	v.grants = v.buf[:0]
	v.keyName, v.workspace = q.attrs.APIKey, q.attrs.WorkspaceID
	for _, p := range cands {
		q.fill(p.Needs())
		limit := p.Limit()
		cost := int64(1)
		switch p.Type {
		case policies.TypeTokens:
			// A reservation above the limit could never be admitted;
			// capped, a large request runs when the window is empty and
			// settlement charges what it really used.
			cost = min(h.reserveTokens(q, p), limit)
		case policies.TypeCost:
			cost = min(h.reserveSpend(q, p), limit)
		}
		if h.st.down.failFast() {
			h.refund(ctx, v.id, v.grants)
			return h.failMode()
		}
		g := grant{policy: p, key: p.GroupKey(&q.attrs), cost: cost, at: time.Now()}
		var (
			d   policies.Decision
			err error
		)
		if holder, ok := lim.(policies.Holder); ok && p.CountsUsage() && h.leased(p.Window()) {
			if v.id == "" {
				v.id = reservationID()
			}
			var r policies.Reservation
			r, err = holder.Hold(ctx, g.key, limit, p.Window(), cost, v.id, h.lease(p.Window()))
			d, g.held = r.Decision, r.Reserved > 0
		} else {
			d, err = lim.Admit(ctx, g.key, limit, p.Window(), cost)
		}
		if err != nil {
			h.refund(ctx, v.id, v.grants)
			if ctx.Err() != nil {
				return nil, err
			}
			h.st.down.failed()
			h.logFailure("rate limiter unavailable", err)
			return h.failMode()
		}
		h.st.down.ok()
		g.dec = d
		if !d.Allowed {
			h.refund(ctx, v.id, v.grants)
			refused := g // a copy, so g itself does not escape on the admit path
			v.refused = &refused
			return v, nil
		}
		v.grants = append(v.grants, g)
	}
	return v, nil
}

// failMode is the outcome of a request the limiter cannot decide: 503
// when failing closed, admission without limits when failing open.
func (h *Handler) failMode() (*verdict, error) {
	if h.ctl.FailClosed() {
		return nil, errUnavailable
	}
	return nil, nil
}

// refund gives back what grants consumed, because the request they
// admitted is not going ahead. It runs even if the client has left.
func (h *Handler) refund(ctx context.Context, id string, grants []grant) {
	if len(grants) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	lim := h.ctl.Limiter()
	now := time.Now()
	for i := range grants {
		if err := settleGrant(ctx, lim, id, &grants[i], 0, now); err != nil {
			h.st.down.failed()
			h.logFailure("rate limiter refund failed", err)
		}
	}
}

// settleGrant charges g used units in place of its reservation: through
// Settle when it is held, else as an Adjust by policies.SettleDelta. An
// unused part is refunded only while the reservation is in its window.
func settleGrant(ctx context.Context, lim policies.Limiter, id string, g *grant, used int64, now time.Time) error {
	p := g.policy
	if holder, ok := lim.(policies.Holder); ok && g.held {
		refundable := now.Sub(g.at) < p.Window()
		_, err := holder.Settle(ctx, g.key, p.Limit(), p.Window(), id, g.cost, used, refundable)
		return err
	}
	delta := policies.SettleDelta(g.cost, used, g.at, now, p.Window())
	if delta == 0 {
		return nil
	}
	return lim.Adjust(ctx, g.key, p.Limit(), p.Window(), delta)
}

// DefaultReservationLease is how long a token or cost reservation counts
// unsettled, at most, before it is given back (Handler.ReservationLease).
const DefaultReservationLease = 10 * time.Minute

// lease is the lease of a reservation on a policy of window: the
// handler's, but at most half the window. Units given back after they
// had left the window would cancel newer ones; half the window keeps
// the reclaim well inside it.
func (h *Handler) lease(window time.Duration) time.Duration {
	l := time.Duration(h.ReservationLease)
	if l <= 0 {
		l = DefaultReservationLease
	}
	return min(l, window/2)
}

// leased reports whether reservations on a policy of window are held
// under a lease: when the lease gives units back at least four times
// sooner than the window would (with the default lease, hourly and
// daily policies, not per-minute ones). A lease costs a Redis limiter
// about a third more per request (two heavier scripts: 215–234 µs
// against 158–169 µs here), which a per-minute window, returning a dead
// instance's units within a minute anyway, does not repay.
func (h *Handler) leased(window time.Duration) bool {
	return h.lease(window) <= window/4
}

// reservationID names one request's held reservations: random, so ids
// of requests on different instances never meet on one counter.
func reservationID() string {
	var b [26]byte
	out := strconv.AppendUint(b[:0], rand.Uint64(), 36)
	return string(strconv.AppendUint(out, rand.Uint64(), 36))
}

// registerSettlement asks llm_gateway to report the outcome, so token and
// cost reservations are settled against the usage the provider reported.
func (h *Handler) registerSettlement(r *http.Request, id string, grants []grant) {
	tokens := false
	for i := range grants {
		if grants[i].policy.CountsUsage() {
			tokens = true
			break
		}
	}
	if !tokens {
		return
	}
	lim := h.ctl.Limiter()
	ctx := context.WithoutCancel(r.Context())
	observe.OnDone(r, func(e *observe.Entry) {
		if e.ChargeDuplicate {
			// A batch line another run of it already charged: this
			// run's reservation is given back whole.
			h.refund(ctx, id, grants)
			return
		}
		h.settle(ctx, lim, id, grants, e)
	})
}
