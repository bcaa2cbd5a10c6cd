package handlers

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/semantic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// maxEmbeddingAnswer bounds the embeddings answer the semantic cache
// holds: 8,192 dimensions (semantic.MaxDims) written as long decimals
// take about 200 KB.
const maxEmbeddingAnswer = 1 << 20

// embedIdentity is who the semantic cache's embedding calls run as.
var embedIdentity = &identity.Caller{Name: "semantic_cache"}

// gatewayEmbedder is the semantic cache's Embedder: it sends an OpenAI
// embeddings request through the gateway's own attempt machinery to the
// configured virtual key, so any embeddings provider of the gateway
// works, credentials are added only on the wire (by the provider's
// Prepare, when the attempt builds the upstream request), and
// the connection obeys the same egress policy as every request to that
// virtual key. Its errors name statuses and causes, never credentials,
// URLs or answer bodies, because the cache logs them.
type gatewayEmbedder struct {
	g          *Gateway
	virtualKey string
	model      string
}

// Embed implements semantic.Embedder. A request's targets share the
// text to embed, so the vector is computed once per request (embedMemo).
func (e *gatewayEmbedder) Embed(ctx context.Context, text string) ([]float32, error) {
	memo, _ := ctx.Value(embedMemoKey{}).(*embedMemo)
	if memo != nil {
		if vec, err, ok := memo.get(text); ok {
			return vec, err
		}
	}
	vec, err := e.embed(ctx, text)
	if memo != nil {
		memo.put(text, vec, err)
	}
	return vec, err
}

func (e *gatewayEmbedder) embed(ctx context.Context, text string) ([]float32, error) {
	hdr := &ingress.Headers{VirtualKey: e.virtualKey}
	plan, err := routing.Resolve(hdr, e.g.app, e.g.configs)
	if err != nil {
		return nil, fmt.Errorf("embedding virtual key %q: no plan", e.virtualKey)
	}
	body := semantic.EmbeddingRequest(e.model, text)
	w := &memoryWriter{header: make(http.Header), max: maxEmbeddingAnswer}
	r, err := clientlessRequest(ctx, http.MethodPost, "/v1/embeddings", http.Header{"Content-Type": {"application/json"}}, body, w)
	if err != nil {
		return nil, err
	}
	q := &Request{
		Header:       hdr,
		RouteHeader:  hdr,
		Identity:     embedIdentity,
		Call:         providers.Call{Op: providers.OpEmbeddings, Method: http.MethodPost, Path: "/embeddings", Header: r.Header, Body: body, Model: e.model},
		URLPath:      "/v1/embeddings",
		ClientHeader: r.Header,
		Plan:         plan,
	}
	// Every answer is held (never written to w) and bounded; no cache.
	if err := e.g.planAttempts(ctx, q, nil, true); err != nil {
		return nil, fmt.Errorf("embedding virtual key %q: %v", e.virtualKey, err)
	}
	ex := &executor{g: e.g, q: q, r: r, out: &responder{w: w}, answerLimit: maxEmbeddingAnswer}
	rq := &routing.Request{Params: body, Path: q.URLPath}
	start := time.Now()
	rr, err := e.g.router.Run(r.Context(), plan, rq, steps(q, ex, nil, nil))
	res := resultOf(rr.Outcome)
	e.account(ctx, start, res, rr.Status)
	if err != nil {
		return nil, fmt.Errorf("embedding virtual key %q: routing failed", e.virtualKey)
	}
	switch {
	case res == nil || res.held == nil:
		return nil, fmt.Errorf("embedding virtual key %q: no answer", e.virtualKey)
	case res.held.status != http.StatusOK:
		return nil, fmt.Errorf("embedding virtual key %q: status %d", e.virtualKey, res.held.status)
	}
	return semantic.ParseEmbedding(res.held.body)
}

// account records an embedding call made for a caller's request (ctx's,
// callerOf) in the usage ledger as the caller's own call, operation
// "embeddings" with the request's trace id and metadata, and charges what
// it used to the usage limits the request was admitted on
// (Request.charge). So the semantic cache spends nothing a caller's
// budget does not see, and the ledger's totals still equal what budgets
// were charged. The call's cost is not in the request's x-gateway-cost
// header, which prices the answer the client got.
func (e *gatewayEmbedder) account(ctx context.Context, start time.Time, res *result, status int) {
	caller := callerOf(ctx)
	if caller == nil || caller.Identity == nil || res == nil {
		return
	}
	id := caller.Identity
	ent := &observe.Entry{
		KeyName: id.Name, Workspace: id.WorkspaceID, Organisation: id.OrganisationID,
		VirtualKey: e.virtualKey, Operation: providers.OpEmbeddings, Method: http.MethodPost, Path: "/embeddings",
		Model: e.model, Status: status, Start: start, Usage: res.usage,
	}
	if caller.Header != nil {
		ent.TraceID, ent.Metadata = caller.Header.TraceID, caller.Header.Metadata
	}
	if res.model != "" {
		ent.Model = res.model
	}
	if res.target != nil {
		ent.Provider = res.target.Settings.Provider
		if res.usage != nil {
			ent.CostUSD, ent.CostKnown = e.g.app.Prices().Cost(ent.Provider, ent.Model, *res.usage)
		}
	}
	e.g.app.UsageLedger().Record(ent)
	if caller.charge != nil {
		if err := caller.charge.Add(ctx, ent); err != nil {
			e.g.logger.Error("charging a semantic cache embedding to the caller's usage limits failed", zap.Error(err))
		}
	}
}

// callerOf returns the request on whose behalf an embedding with ctx is
// made, or nil: the one whose cache step put its memo in ctx. A context
// value, not a request variable a placeholder could print: the request's
// headers hold the caller's keys.
func callerOf(ctx context.Context) *Request {
	m, _ := ctx.Value(embedMemoKey{}).(*embedMemo)
	if m == nil {
		return nil
	}
	return m.caller
}

// embedMemoKey is the context key of a request's embedMemo.
type embedMemoKey struct{}

// embedMemo remembers a request's embedding, or the failure to get it,
// so a fallback to another semantic-mode target neither embeds the same
// text again nor waits out a second timeout.
type embedMemo struct {
	// caller is the request the embeddings are made for (callerOf).
	caller *Request
	mu     sync.Mutex
	set    bool
	text   string
	vec    []float32
	err    error
}

func (m *embedMemo) get(text string) ([]float32, error, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.set || m.text != text {
		return nil, nil, false
	}
	return m.vec, m.err, true
}

func (m *embedMemo) put(text string, vec []float32, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set, m.text, m.vec, m.err = true, text, vec, err
}
