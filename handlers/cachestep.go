package handlers

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/semantic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// statusNoCache is the cache status of a target without a cache.
const statusNoCache = cache.StatusDisabled

// cacheable reports whether answers of an operation may be cached: the
// JSON inference operations whose answer is determined by the body.
// Files, batches, fine-tuning, audio, images and pass-through calls are
// never cached.
func cacheable(method string, op providers.Operation) bool {
	if method != http.MethodPost {
		return false
	}
	switch op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpMessages:
		return true
	}
	return false
}

// cacheStep is the response cache as a step around the sender: cached
// looks a target's answer up (by exact key, then, for cache mode
// "semantic", by similarity), and attempt runs the attempt with a sink
// that stores its successful answer. Each caching target's request
// (its key) was made while planning (request); a step serves one
// request.
type cacheStep struct {
	next step
	g    *Gateway
	rc   *responseCache
	// memo holds the request's embedding, shared by its targets.
	memo embedMemo
}

// cachedTarget is one target's cache request and, once looked up, the
// lookup's outcome, which the store after a miss needs.
type cachedTarget struct {
	req    semantic.Request
	res    semantic.Result
	looked bool
	maxAge time.Duration
	// parts are what req.Key was computed from; body is the body it
	// keys (the target's own, or a before-hook mutator's), so a
	// mutated body gets its own key.
	parts cache.KeyParts
	body  []byte
	// uncacheable marks a mutated body that is not a JSON object.
	uncacheable bool
}

// request returns the cache request of planned attempt p of q, or nil
// when its target does not cache or its answer cannot be cached.
func (rc *responseCache) request(q *Request, p *attemptPlan) *cachedTarget {
	t := p.target
	if t.Cache == nil || !cacheable(q.Call.Method, p.op) || (!cacheable(q.Call.Method, q.Call.Op) && q.adapter == nil) {
		return nil
	}
	path := q.Call.Path
	if p.adapted {
		// A translated target is sent, and caches, a chat completion.
		path = "/chat/completions"
	}
	identity := t.Identity()
	parts := cache.KeyParts{
		Op:        string(p.op),
		Method:    q.Call.Method,
		Path:      path,
		Target:    identity,
		Workspace: q.Identity.WorkspaceID,
		Body:      p.body,
		Namespace: q.Header.CacheNamespace,
		Metadata:  q.Header.MetadataRaw,
	}
	key, err := cache.Key(parts)
	if err != nil {
		return nil // not a JSON object: not cacheable
	}
	ct := &cachedTarget{maxAge: cache.MaxAge(t.Cache), parts: parts, body: p.body}
	ct.req = semantic.Request{Key: key, ForceRefresh: q.Header.ForceRefresh, Semantic: t.Cache.Mode == "semantic"}
	if ct.req.Semantic {
		ct.req.Body = p.body
		ct.req.Parts = semantic.PartitionParts{
			Op: string(q.Call.Op), Method: q.Call.Method, Path: q.Call.Path,
			Workspace: q.Identity.WorkspaceID,
			Namespace: q.Header.CacheNamespace, Metadata: q.Header.MetadataRaw,
			Target: identity, Model: p.model, Embedder: rc.embedder,
		}
	}
	return ct
}

// context returns ctx carrying the request's embedding memo when ct may
// embed.
func (c *cacheStep) context(ctx context.Context, ct *cachedTarget) context.Context {
	if !ct.req.Semantic {
		return ctx
	}
	if !c.rc.semanticEnabled() {
		c.rc.warnNoSemantic(c.g)
		return ctx
	}
	return context.WithValue(ctx, embedMemoKey{}, &c.memo)
}

// label is the cache status of a target whose answer was not found: the
// lookup's MISS, SEMANTIC MISS or REFRESH. A semantic-mode target reports
// SEMANTIC MISS even when no semantic cache is configured (it is then
// served as exact match); an exact hit is an honest HIT, and only a real
// similarity match is a SEMANTIC HIT.
func (ct *cachedTarget) label() string {
	status := cache.StatusMiss
	switch {
	case ct.looked:
		status = ct.res.Status
	case ct.req.ForceRefresh:
		status = cache.StatusRefresh
	}
	if status == cache.StatusMiss && ct.req.Semantic {
		return cache.StatusSemanticMiss
	}
	return status
}

// cached implements step: a stored answer to p, as an SSE stream when
// the client asked for one. An answer with no stream form is a miss.
func (c *cacheStep) cached(ctx context.Context, p attemptPlan) (routing.Outcome, bool) {
	ct := c.target(&p)
	if ct == nil {
		return c.next.cached(ctx, p)
	}
	ct.res, ct.looked = c.rc.Lookup(c.context(ctx, ct), ct.req), true
	ent := ct.res.Entry
	if ent == nil {
		return routing.Outcome{}, false
	}
	body, ctype := ent.Body, "application/json"
	if p.stream {
		var sse []byte
		var ok bool
		if p.op == providers.OpMessages {
			// A native Messages answer replays as Anthropic's events;
			// a translated target's chat completion as OpenAI's, which
			// the adapter translates.
			sse, ok = messages.SynthesizeStream(ent.Body)
		} else {
			sse, ok = cache.Synthesize(ent.Body, gjson.GetBytes(p.body, "stream_options.include_usage").Bool())
		}
		if !ok {
			return routing.Outcome{}, false
		}
		body, ctype = sse, "text/event-stream"
	}
	res := &result{answerInfo: answerInfo{target: p.target, label: ct.res.Status, adapted: p.adapted}, prompt: p.prompt, model: p.model}
	if m := gjson.GetBytes(ent.Body, "model").String(); m != "" && !p.stream {
		res.model = m
	}
	h := http.Header{"Content-Type": {ctype}}
	if p.stream {
		h.Set("Cache-Control", "no-cache")
	}
	res.held = &heldAnswer{status: ent.Status, header: h, body: body, stream: p.stream}
	return routing.Outcome{Status: ent.Status, Cached: true, Result: res}, true
}

// attempt implements step: the attempt, with a sink storing its
// successful answer when p's target caches.
func (c *cacheStep) attempt(ctx context.Context, p attemptPlan) routing.Outcome {
	ct := c.target(&p)
	if ct == nil {
		return c.next.attempt(ctx, p)
	}
	// Storing outlives a client that leaves as the answer ends; the
	// backend and the embedder bound their own time.
	p.sink = &storeSink{rc: c.rc, ct: ct, ctx: context.WithoutCancel(c.context(ctx, ct)), anthropicSSE: p.op == providers.OpMessages}
	p.label = ct.label()
	return c.next.attempt(ctx, p)
}

// target returns p's cache request, keyed on the body p sends: a
// before-request hook's mutator (the guard step runs it before the
// lookup and before each attempt) changes the body, and an answer to the
// changed body must never be served for the unchanged one, nor the other
// way round. nil when p's target has no cache or the changed body cannot
// be keyed.
func (c *cacheStep) target(p *attemptPlan) *cachedTarget {
	ct := p.cache
	if ct == nil {
		return nil
	}
	if bytes.Equal(p.body, ct.body) {
		if ct.uncacheable {
			return nil
		}
		return ct
	}
	// The body changed since the key was made: key it again, and forget
	// the lookup made for the other body.
	parts := ct.parts
	parts.Body = p.body
	ct.body, ct.looked, ct.res = p.body, false, semantic.Result{}
	key, err := cache.Key(parts)
	if ct.uncacheable = err != nil; ct.uncacheable {
		return nil
	}
	ct.req.Key = key
	if ct.req.Semantic {
		ct.req.Body = p.body
	}
	return ct
}

// storeSink stores a complete successful answer under its key and, in
// semantic mode, indexes its request's embedding. A streamed answer (its
// SSE transcript) is stored as the JSON answer it adds up to, or not at
// all if it cannot be assembled.
type storeSink struct {
	rc  *responseCache
	ct  *cachedTarget
	ctx context.Context
	// anthropicSSE marks a native Messages answer, whose stream is
	// Anthropic's events (messages.AssembleStream).
	anthropicSSE bool
}

// Hold implements answerSink: a cached answer is stored before the
// client has it all, so the client's next identical request finds it.
func (s *storeSink) Hold() bool { return true }

// Limit implements answerSink: a larger stream is not stored.
func (s *storeSink) Limit() int { return cache.MaxEntrySize }

// Done implements answerSink.
func (s *storeSink) Done(status int, body []byte, stream bool) {
	if stream {
		assemble := cache.Assemble
		if s.anthropicSSE {
			assemble = messages.AssembleStream
		}
		var ok bool
		if body, ok = assemble(body); !ok {
			return
		}
	} else if jsonlimit.Check(body) != nil {
		return
	} else if cap(body)-len(body) > len(body)/8 {
		// Exactly sized, so the cache's byte accounting is true: a
		// held answer of unknown length may have grown to twice its
		// size. One of declared length is held in an exact buffer,
		// which the cache keeps without a copy (it is never written
		// again).
		body = bytes.Clone(body)
	}
	s.rc.Save(s.ctx, s.ct.req, s.ct.res, status, body, s.ct.maxAge)
}
