package handlers

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

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

// Cached implements routing.Executor: it looks t's answer up in the
// response cache and, on a hit, writes it to the client. On a miss it
// remembers the key, so a successful attempt on t stores its answer.
// cache.mode "semantic" is served as exact match (semantic matching is
// not implemented), and says so on misses: SEMANTIC MISS; an exact hit
// is an honest HIT.
func (x *exchange) Cached(_ context.Context, t *routing.Target) (routing.Outcome, bool) {
	x.storeKey, x.storeTarget = "", nil
	x.leafCache = cache.StatusDisabled
	if t.Cache == nil || x.g.cache == nil || !cacheable(x.r.Method, x.call.Op) {
		return routing.Outcome{}, false
	}
	body, err := x.bodyFor(t)
	if err != nil {
		return routing.Outcome{}, false // the attempt reports it
	}
	key, err := cache.Key(cache.KeyParts{
		Op:        string(x.call.Op),
		Method:    x.call.Method,
		Path:      x.call.Path,
		Target:    t.Identity(),
		Workspace: x.identity.WorkspaceID,
		Body:      body,
		Namespace: x.hdr.CacheNamespace,
		Metadata:  x.hdr.MetadataRaw,
	})
	if err != nil {
		return routing.Outcome{}, false // not a JSON object: not cacheable
	}
	x.storeKey, x.storeTarget = key, t
	if x.hdr.ForceRefresh {
		x.leafCache = cache.StatusRefresh
		return routing.Outcome{}, false
	}
	x.leafCache = cache.StatusMiss
	if t.Cache.Mode == "semantic" {
		x.leafCache = cache.StatusSemanticMiss
	}
	e, ok := x.g.cache.Get(key)
	if !ok || !x.serveCached(t, e) {
		return routing.Outcome{}, false
	}
	return routing.Outcome{Status: e.Status, Committed: true, Cached: true}, true
}

// serveCached writes a stored answer, as an SSE stream when the client
// asked for one. It reports false, having written nothing, when the
// answer has no stream form.
func (x *exchange) serveCached(t *routing.Target, e *cache.Entry) bool {
	body := e.Body
	ct := "application/json"
	if x.call.Stream {
		req, _ := x.bodyFor(t)
		includeUsage := gjson.GetBytes(req, "stream_options.include_usage").Bool()
		sse, ok := cache.Synthesize(e.Body, includeUsage)
		if !ok {
			return false
		}
		body, ct = sse, "text/event-stream"
	}
	x.lastTarget, x.retries = t, 0
	x.cacheState = cache.StatusHit
	x.entry.Provider = t.Settings.Provider
	if m := gjson.GetBytes(body, "model").String(); m != "" && !x.call.Stream {
		x.entry.Model = m
	}
	h := x.w.Header()
	h.Set("Content-Type", ct)
	if x.call.Stream {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	x.setGatewayHeaders(h)
	x.w.WriteHeader(e.Status)
	x.entry.FirstByte = time.Now()
	_, _ = x.w.Write(body)
	return true
}

// store keeps a complete successful answer of t under the key Cached
// computed for it. A streamed answer (its SSE transcript) is stored as the
// JSON answer it adds up to, or not at all if it cannot be assembled.
func (x *exchange) store(t *routing.Target, status int, body []byte, stream bool) {
	if x.storeTarget != t || x.storeKey == "" || status < 200 || status >= 300 {
		return
	}
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
	x.g.cache.Set(x.storeKey, status, body, cache.MaxAge(t.Cache))
}

// bodyFor returns the request body for t, computed once per target: the
// prompt of t's prompt_id rendered with the client's variables (chat
// completions only), and t's override_params merged in (shallowly,
// overriding the client's keys). An error is a prompt that could not be
// rendered: a client error for this target only.
func (x *exchange) bodyFor(t *routing.Target) ([]byte, error) {
	render := t.PromptID != "" && x.call.Op == providers.OpChat
	if len(t.OverrideParams) == 0 && !render {
		x.usedPrompt = x.basePrompt
		return x.call.Body, nil
	}
	if x.bodyTarget != t {
		body, use, err := x.call.Body, x.basePrompt, error(nil)
		if render {
			body, use, err = x.renderTarget(t)
		}
		if err == nil && len(t.OverrideParams) > 0 && jsonlimit.Check(body) == nil {
			body = applyOverrides(body, t.OverrideParams)
		}
		x.bodyTarget, x.body, x.bodyErr, x.bodyPrompt = t, body, err, use
	}
	x.usedPrompt = x.bodyPrompt
	return x.body, x.bodyErr
}
