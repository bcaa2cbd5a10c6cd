package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
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
}

// verdict is the outcome of admitting a request that matched at least one
// policy.
type verdict struct {
	// grants are the admissions made, in policy order. When refused is
	// set they have already been refunded and are kept for the headers.
	grants []grant
	// refused is the decision of the policy that refused, or nil.
	refused *grant
	// buf holds the grants of the usual one or two policies, so a verdict
	// is a single allocation.
	buf [2]grant
}

// errUnavailable is returned by admit when the limiter or the store failed
// and the gateway fails closed.
var errUnavailable = errors.New("ratelimit: limiter unavailable")

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	v, err := h.admit(r)
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client left while we asked the limiter
		}
		// The breaker lets one request probe the limiter every second.
		w.Header()[hdrRetryAfter] = []string{"1"}
		apierror.Write(w, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
			"the rate limiter is unavailable; try again later").WithCode("rate_limiter_unavailable"))
		return nil
	}
	if v == nil {
		return next.ServeHTTP(w, r)
	}
	setHeaders(w.Header(), v)
	if v.refused != nil {
		h.reject(w, r, v.refused)
		return nil
	}
	h.registerSettlement(r, v.grants)
	return next.ServeHTTP(newHeaderWriter(w, v), r)
}

// reject answers 429 for the policy that refused.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, g *grant) {
	setRetryHeaders(w.Header(), g.dec.RetryAfter)
	e := apierror.New(http.StatusTooManyRequests, apierror.TypeRateLimit, rejectMessage(g.policy, g.dec.RetryAfter)).
		WithCode("rate_limit_exceeded")
	apierror.Write(w, e)
	if h.logger == nil {
		return
	}
	if ce := h.logger.Check(zap.DebugLevel, "rate limit exceeded"); ce != nil {
		ce.Write(zap.String("policy_id", g.policy.ID),
			zap.String("policy_type", g.policy.Type),
			zap.Duration("retry_after", g.dec.RetryAfter),
			zap.String("path", r.URL.Path))
	}
}

// request is the per-request state of matching: the attributes, filled
// lazily where filling them costs (metadata, and the model, which needs
// the body).
type request struct {
	r         *http.Request
	ctl       control
	attrs     policies.Attributes
	routeDone bool
	mdDone    bool
	bodyDone  bool
	body      []byte
	// size is the body's size in bytes, known even when the body was too
	// large to read (from Content-Length or what was read).
	size int64
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
func (h *Handler) admit(r *http.Request) (*verdict, error) {
	ctx := r.Context()
	var active []*policies.Policy
	if h.st.storeLoaded.Load() || !h.st.storeDown.failFast() {
		var err error
		if active, err = h.ctl.Policies().Active(ctx); err == nil {
			h.st.storeLoaded.Store(true)
		} else {
			// Only the first load of a store can fail (later failures
			// keep the previous set), so the set is unknown.
			if ctx.Err() != nil {
				return nil, err
			}
			h.st.storeDown.failed()
			h.logFailure("rate-limit policy store unavailable", err)
			if h.ctl.FailClosed() {
				return nil, errUnavailable
			}
			active = nil
		}
	} else if h.ctl.FailClosed() {
		return nil, errUnavailable
	}
	if len(active) == 0 && len(h.static) == 0 {
		return nil, nil
	}
	if _, completion := prompts.CompletionsRef(r.URL.Path); !completion && controlplane.Owns(r.URL.Path) {
		// The management APIs are never limited: a policy must not lock
		// its administrators out of the API that lifts it. Prompt
		// completions are inference and are limited like chat.
		return nil, nil
	}
	key, _ := ingress.Get(r.Header, ingress.APIKey)
	id, ok := h.ctl.Authenticate(strings.TrimSpace(key))
	if !ok {
		return nil, nil
	}
	q := request{r: r, ctl: h.ctl}
	q.attrs.WorkspaceID, q.attrs.OrganisationID, q.attrs.APIKey = id.WorkspaceID, id.OrganisationID, id.Name

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

// fillRouting sets the attributes that say where the request goes:
// provider, virtual key and saved config id, from the gateway headers the
// way llm_gateway resolves them (config, then virtual key, then provider),
// without parsing more than the top level of a config. It runs only when a
// policy names one of them.
func (q *request) fillRouting() {
	q.routeDone = true
	hdr := q.r.Header
	a := &q.attrs
	a.VirtualKey, _ = ingress.Get(hdr, ingress.VirtualKey)
	a.Provider, _ = ingress.Get(hdr, ingress.Provider)
	cfg, _ := ingress.Get(hdr, ingress.Config)
	if cfg == "" {
		if a.Provider == "" && a.VirtualKey != "" {
			if s, ok := q.ctl.VirtualKey(a.VirtualKey); ok {
				a.Provider = s.Provider
			}
		}
		a.Provider = lower(a.Provider)
		return
	}
	raw := []byte(nil)
	if !strings.HasPrefix(cfg, "{") {
		saved, ok := q.ctl.SavedConfig(cfg)
		if !ok {
			return // the gateway answers 404 for an unknown config id
		}
		a.ConfigID, raw = cfg, saved
	}
	// A config's top-level provider or virtual key names the provider of
	// a single-target config; strategies with several targets have none.
	var top []gjson.Result
	if raw != nil {
		top = gjson.GetManyBytes(raw, "provider", "virtual_key")
	} else {
		top = gjson.GetMany(cfg, "provider", "virtual_key")
	}
	if p := top[0].String(); p != "" {
		a.Provider = p
	} else if vk := top[1].String(); vk != "" {
		if s, ok := q.ctl.VirtualKey(vk); ok {
			a.Provider = s.Provider
		}
	}
	a.Provider = lower(a.Provider)
}

// lower lower-cases ASCII without allocating when s is already lower case.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// match reports whether p applies to the request, or that it cannot tell
// before the body is read: p tests or groups by the model, or counts
// tokens (which needs the estimate).
func (q *request) match(p *policies.Policy) int {
	a := &q.attrs
	if p.OrganisationID != "" && p.OrganisationID != a.OrganisationID {
		// Same tenant isolation as policies.Policy.Matches; the request's
		// organisation is always known here.
		return noMatch
	}
	res := isMatch
	for i := range p.Conditions {
		c := &p.Conditions[i]
		if c.Key == policies.KeyModel && !q.bodyDone {
			res = needsBody
			continue
		}
		q.need(c.Key)
		v, ok := a.Get(c.Key)
		if !ok || (c.Value != "*" && v != c.Value) {
			return noMatch
		}
	}
	if res == isMatch && !q.bodyDone {
		if p.Type == policies.TypeTokens {
			return needsBody
		}
		for i := range p.GroupBy {
			if p.GroupBy[i].Key == policies.KeyModel {
				return needsBody
			}
		}
	}
	return res
}

// need fills the lazily computed attribute that key reads, if not done.
func (q *request) need(key string) {
	switch key {
	case policies.KeyProvider, policies.KeyVirtualKey, policies.KeyConfigID:
		if !q.routeDone {
			q.fillRouting()
		}
	default:
		if !q.mdDone && strings.HasPrefix(key, policies.MetadataPrefix) {
			q.parseMetadata()
		}
	}
}

// parseMetadata reads the x-gateway-metadata header as llm_gateway does:
// string values as they are, other JSON values as their JSON text, nulls
// dropped. A malformed header leaves no metadata; the gateway rejects it.
func (q *request) parseMetadata() {
	q.mdDone = true
	raw, _ := ingress.Get(q.r.Header, ingress.Metadata)
	raw = strings.TrimSpace(raw)
	if raw == "" || !gjson.Valid(raw) {
		return
	}
	obj := gjson.Parse(raw)
	if !obj.IsObject() {
		return
	}
	m := make(map[string]string, 4)
	obj.ForEach(func(k, v gjson.Result) bool {
		switch v.Type {
		case gjson.Null:
		case gjson.String:
			m[k.String()] = v.Str
		default:
			m[k.String()] = v.Raw
		}
		return true
	})
	q.attrs.Metadata = m
}

// readBody reads a JSON body (bounded) for the model and the token
// estimate and shares it with llm_gateway, so it is read once. Non-JSON
// bodies (multipart audio, images) are not read: their size says nothing
// about tokens and the model is in a form field. A body above the bound is
// put back untouched for the gateway to reject.
func (h *Handler) readBody(q *request) {
	q.bodyDone = true
	r := q.r
	if b, ok := ingress.Body(r); ok {
		q.body, q.size = b, int64(len(b))
	} else if r.Body != nil && r.Body != http.NoBody && isJSON(r.Header.Get("Content-Type")) {
		if r.ContentLength > h.MaxRequestBody {
			q.size = r.ContentLength
		} else {
			b, err := io.ReadAll(io.LimitReader(r.Body, h.MaxRequestBody+1))
			q.size = int64(len(b))
			if err != nil || q.size > h.MaxRequestBody {
				// Hand the gateway the same stream it would have had, so
				// it reports the read error or the size itself.
				r.Body = struct {
					io.Reader
					io.Closer
				}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
			} else {
				q.body = b
				r.Body = io.NopCloser(bytes.NewReader(b))
				ingress.SetBody(r, b)
			}
		}
	}
	if len(q.body) > 0 {
		q.attrs.Model = gjson.GetBytes(q.body, "model").String()
	}
}

// isJSON reports whether a Content-Type is JSON; an absent one is taken as
// JSON, as the gateway does for its JSON operations.
func isJSON(ct string) bool {
	if ct == "" {
		return true
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(strings.ToLower(ct))
	return ct == "application/json" || strings.HasSuffix(ct, "+json")
}

// consume admits the request against every matched policy, all or
// nothing: when one refuses (or the limiter fails) the units already taken
// by the others are given back.
func (h *Handler) consume(ctx context.Context, q *request, cands []*policies.Policy) (*verdict, error) {
	lim := h.ctl.Limiter()
	v := new(verdict)
	v.grants = v.buf[:0]
	estimate := int64(-1)
	for _, p := range cands {
		for i := range p.GroupBy {
			q.need(p.GroupBy[i].Key)
		}
		limit := p.Limit()
		cost := int64(1)
		if p.Type == policies.TypeTokens {
			if estimate < 0 {
				estimate = estimateTokens(q.body, q.size)
			}
			// A reservation above the limit could never be admitted;
			// capped, a large request runs when the window is empty and
			// settlement charges what it really used.
			cost = min(estimate, limit)
		}
		if h.st.down.failFast() {
			h.refund(ctx, v.grants)
			return h.failMode()
		}
		g := grant{policy: p, key: p.GroupKey(&q.attrs), cost: cost, at: time.Now()}
		d, err := lim.Admit(ctx, g.key, limit, p.Window(), cost)
		if err != nil {
			h.refund(ctx, v.grants)
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
			h.refund(ctx, v.grants)
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
func (h *Handler) refund(ctx context.Context, grants []grant) {
	if len(grants) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	lim := h.ctl.Limiter()
	now := time.Now()
	for i := range grants {
		g := &grants[i]
		p := g.policy
		delta := policies.SettleDelta(g.cost, 0, g.at, now, p.Window())
		if delta == 0 {
			continue
		}
		if err := lim.Adjust(ctx, g.key, p.Limit(), p.Window(), delta); err != nil {
			h.st.down.failed()
			h.logFailure("rate limiter refund failed", err)
		}
	}
}

// registerSettlement asks llm_gateway to report the outcome, so token
// reservations are settled against the usage the provider reported.
func (h *Handler) registerSettlement(r *http.Request, grants []grant) {
	tokens := false
	for i := range grants {
		if grants[i].policy.Type == policies.TypeTokens {
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
		h.settle(ctx, lim, grants, e)
	})
}
