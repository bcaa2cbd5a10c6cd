package handlers

import (
	"bytes"
	"context"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
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
// Cached looks a target's answer up, and Attempt runs the attempt with a
// sink that stores its successful answer. Keys are computed once, when
// the step is made; the step then does not change.
type cacheStep struct {
	next  *executor
	store *cache.Store
	// keys holds the cache key of every target with a cache.
	keys map[*routing.Target]string
}

// withCache returns the executor to run q with: next itself when no target
// of q's plan caches (no cost), else next wrapped in a cacheStep.
func withCache(next *executor, store *cache.Store) routing.Executor {
	q := next.q
	if store == nil || (!cacheable(q.Call.Method, q.Call.Op) && q.adapter == nil) {
		return next
	}
	var keys map[*routing.Target]string
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
		key, err := cache.Key(cache.KeyParts{
			Op:        string(tb.op),
			Method:    q.Call.Method,
			Path:      path,
			Target:    t.Identity(),
			Workspace: q.Identity.WorkspaceID,
			Body:      tb.body,
			Namespace: q.Header.CacheNamespace,
			Metadata:  q.Header.MetadataRaw,
		})
		if err != nil {
			continue // not a JSON object: not cacheable
		}
		if keys == nil {
			keys = make(map[*routing.Target]string, len(q.Plan.Leaves))
		}
		keys[t] = key
	}
	if keys == nil {
		return next
	}
	return &cacheStep{next: next, store: store, keys: keys}
}

// missLabel is the cache status of a target whose answer was not found.
// cache.mode "semantic" is served as exact match (semantic matching is
// not implemented), and says so on misses: SEMANTIC MISS; an exact hit is
// an honest HIT.
func (c *cacheStep) missLabel(t *routing.Target) string {
	switch {
	case c.next.q.Header.ForceRefresh:
		return cache.StatusRefresh
	case t.Cache.Mode == "semantic":
		return cache.StatusSemanticMiss
	}
	return cache.StatusMiss
}

// Cached implements routing.Executor: a stored answer of t, as an SSE
// stream when the client asked for one. An answer with no stream form is
// a miss.
func (c *cacheStep) Cached(_ context.Context, t *routing.Target) (routing.Outcome, bool) {
	key := c.keys[t]
	if key == "" || c.next.q.Header.ForceRefresh {
		return routing.Outcome{}, false
	}
	ent, ok := c.store.Get(key)
	if !ok {
		return routing.Outcome{}, false
	}
	q := c.next.q
	body, ct := ent.Body, "application/json"
	tb, _ := q.bodyFor(t)
	if tb.stream {
		includeUsage := gjson.GetBytes(tb.body, "stream_options.include_usage").Bool()
		sse, ok := cache.Synthesize(ent.Body, includeUsage)
		if !ok {
			return routing.Outcome{}, false
		}
		body, ct = sse, "text/event-stream"
	}
	res := &result{answerInfo: answerInfo{target: t, label: cache.StatusHit, adapted: tb.adapted}, prompt: tb.prompt, model: tb.model}
	if m := gjson.GetBytes(ent.Body, "model").String(); m != "" && !tb.stream {
		res.model = m
	}
	h := http.Header{"Content-Type": {ct}}
	if tb.stream {
		h.Set("Cache-Control", "no-cache")
	}
	res.held = &heldAnswer{status: ent.Status, header: h, body: body, stream: tb.stream}
	return routing.Outcome{Status: ent.Status, Cached: true, Result: res}, true
}

// Attempt implements routing.Executor: the attempt, with a sink storing
// its successful answer when t caches.
func (c *cacheStep) Attempt(ctx context.Context, t *routing.Target, try int) routing.Outcome {
	key := c.keys[t]
	if key == "" {
		return c.next.attempt(ctx, t, try, attemptOpts{label: statusNoCache})
	}
	sink := &storeSink{store: c.store, key: key, t: t}
	return c.next.attempt(ctx, t, try, attemptOpts{sink: sink, label: c.missLabel(t)})
}

// storeSink stores a complete successful answer under its key. A
// streamed answer (its SSE transcript) is stored as the JSON answer it
// adds up to, or not at all if it cannot be assembled.
type storeSink struct {
	store *cache.Store
	key   string
	t     *routing.Target
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
	} else {
		// Exactly sized, so the cache's byte accounting is true; the
		// held buffer may be twice as large.
		body = bytes.Clone(body)
	}
	s.store.Set(s.key, status, body, cache.MaxAge(s.t.Cache))
}
