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
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings:
		return true
	}
	return false
}

// cacheStep is the response cache as a decorator around the executor:
// Cached looks a target's answer up (by exact key, then, for cache mode
// "semantic", by similarity), and Attempt runs the attempt with a sink
// that stores its successful answer. Keys are computed once, when the
// step is made; a step serves one request.
type cacheStep struct {
	next *executor
	rc   *responseCache
	// targets holds the cache request of every target with a cache.
	targets map[*routing.Target]*cachedTarget
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

// withCache returns the executor to run q with: next itself when no target
// of q's plan caches (no cost), else next wrapped in a cacheStep.
func withCache(next *executor, rc *responseCache) routing.Executor {
	q := next.q
	if rc == nil || (!cacheable(q.Call.Method, q.Call.Op) && q.adapter == nil) {
		return next
	}
	var targets map[*routing.Target]*cachedTarget
	for _, t := range q.Plan.Leaves {
		if t.Cache == nil {
			continue
		}
		tb, err := q.bodyFor(t)
		if err != nil || !cacheable(q.Call.Method, tb.op) {
			continue // the attempt reports the error
		}
		path := q.Call.Path
		if tb.adapted {
			// A translated target is sent, and caches, a chat completion.
			path = "/chat/completions"
		}
		identity := t.Identity()
		parts := cache.KeyParts{
			Op:        string(tb.op),
			Method:    q.Call.Method,
			Path:      path,
			Target:    identity,
			Workspace: q.Identity.WorkspaceID,
			Body:      tb.body,
			Namespace: q.Header.CacheNamespace,
			Metadata:  q.Header.MetadataRaw,
		}
		key, err := cache.Key(parts)
		if err != nil {
			continue // not a JSON object: not cacheable
		}
		ct := &cachedTarget{maxAge: cache.MaxAge(t.Cache), parts: parts, body: tb.body}
		ct.req = semantic.Request{Key: key, ForceRefresh: q.Header.ForceRefresh, Semantic: t.Cache.Mode == "semantic"}
		if ct.req.Semantic {
			ct.req.Body = tb.body
			ct.req.Parts = semantic.PartitionParts{
				Op: string(q.Call.Op), Method: q.Call.Method, Path: q.Call.Path,
				Workspace: q.Identity.WorkspaceID,
				Namespace: q.Header.CacheNamespace, Metadata: q.Header.MetadataRaw,
				Target: identity, Model: tb.model, Embedder: rc.embedder,
			}
		}
		if targets == nil {
			targets = make(map[*routing.Target]*cachedTarget, len(q.Plan.Leaves))
		}
		targets[t] = ct
	}
	if targets == nil {
		return next
	}
	return &cacheStep{next: next, rc: rc, targets: targets}
}

// context returns ctx carrying the request's embedding memo when ct may
// embed.
func (c *cacheStep) context(ctx context.Context, ct *cachedTarget) context.Context {
	if !ct.req.Semantic {
		return ctx
	}
	if !c.rc.semanticEnabled() {
		c.rc.warnNoSemantic(c.next.g)
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

// Cached implements routing.Executor: a stored answer of t, as an SSE
// stream when the client asked for one. An answer with no stream form is
// a miss.
func (c *cacheStep) Cached(ctx context.Context, t *routing.Target) (routing.Outcome, bool) {
	ct := c.target(t)
	if ct == nil {
		return routing.Outcome{}, false
	}
	ct.res, ct.looked = c.rc.Lookup(c.context(ctx, ct), ct.req), true
	ent := ct.res.Entry
	if ent == nil {
		return routing.Outcome{}, false
	}
	q := c.next.q
	body, ctype := ent.Body, "application/json"
	tb, _ := q.bodyFor(t)
	if tb.stream {
		includeUsage := gjson.GetBytes(tb.body, "stream_options.include_usage").Bool()
		sse, ok := cache.Synthesize(ent.Body, includeUsage)
		if !ok {
			return routing.Outcome{}, false
		}
		body, ctype = sse, "text/event-stream"
	}
	res := &result{answerInfo: answerInfo{target: t, label: ct.res.Status, adapted: tb.adapted}, prompt: tb.prompt, model: tb.model}
	if m := gjson.GetBytes(ent.Body, "model").String(); m != "" && !tb.stream {
		res.model = m
	}
	h := http.Header{"Content-Type": {ctype}}
	if tb.stream {
		h.Set("Cache-Control", "no-cache")
	}
	res.held = &heldAnswer{status: ent.Status, header: h, body: body, stream: tb.stream}
	return routing.Outcome{Status: ent.Status, Cached: true, Result: res}, true
}

// Attempt implements routing.Executor: the attempt, with a sink storing
// its successful answer when t caches.
func (c *cacheStep) Attempt(ctx context.Context, t *routing.Target, try int) routing.Outcome {
	ct := c.target(t)
	if ct == nil {
		return c.next.attempt(ctx, t, try, attemptOpts{label: statusNoCache})
	}
	// Storing outlives a client that leaves as the answer ends; the
	// backend and the embedder bound their own time.
	sink := &storeSink{rc: c.rc, ct: ct, ctx: context.WithoutCancel(c.context(ctx, ct))}
	return c.next.attempt(ctx, t, try, attemptOpts{sink: sink, label: ct.label()})
}

// target returns t's cache request, keyed on the body t is actually
// sent: a before-request hook's mutator (guardStep runs it before the
// lookup and before each attempt) changes the body, and an answer to the
// changed body must never be served for the unchanged one, nor the other
// way round. nil when t has no cache or the changed body cannot be keyed.
func (c *cacheStep) target(t *routing.Target) *cachedTarget {
	ct := c.targets[t]
	if ct == nil {
		return nil
	}
	body := c.next.guards.bodyFor(t)
	if body == nil {
		body = ct.parts.Body
	}
	if bytes.Equal(body, ct.body) {
		if ct.uncacheable {
			return nil
		}
		return ct
	}
	// The body changed since the key was made: key it again, and forget
	// the lookup made for the other body.
	parts := ct.parts
	parts.Body = body
	ct.body, ct.looked, ct.res = body, false, semantic.Result{}
	key, err := cache.Key(parts)
	if ct.uncacheable = err != nil; ct.uncacheable {
		return nil
	}
	ct.req.Key = key
	if ct.req.Semantic {
		ct.req.Body = body
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
}

// Hold implements answerSink: a cached answer is stored before the
// client has it all, so the client's next identical request finds it.
func (s *storeSink) Hold() bool { return true }

// Limit implements answerSink: a larger stream is not stored.
func (s *storeSink) Limit() int { return cache.MaxEntrySize }

// Done implements answerSink.
func (s *storeSink) Done(status int, body []byte, stream bool) {
	if stream {
		var ok bool
		if body, ok = cache.Assemble(body); !ok {
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
