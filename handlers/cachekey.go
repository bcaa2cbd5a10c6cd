package handlers

import (
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Prompt cache keys for affinity sessions. OpenAI routes a request to a
// prompt-cache machine by a hash of the prompt's start and, when given,
// prompt_cache_key; requests sharing a key share a cache. When a request
// reaches an OpenAI target under a loadbalance node with affinity and
// names its session some other way than its own prompt_cache_key (the
// session header, metadata, or the conversation's hash), the gateway adds
// prompt_cache_key = routing.GatewayCacheKey (a hash, no client text) to
// what that target is sent, so the turns of one session keep hitting one
// cache on the provider's side too, as affinity keeps them on one target
// on the gateway's. A key the client sent is never replaced. Other
// providers take no such field or header (Anthropic caches by explicit
// cache_control breakpoints, Gemini by cached-content ids), so nothing
// is added for them.

// cacheKeyOps are the operations that take prompt_cache_key.
func cacheKeyOp(op providers.Operation) bool {
	return op == providers.OpChat || op == providers.OpResponses
}

// addCacheKeys adds the session's prompt_cache_key to the attempt plans
// of q's OpenAI targets under affinity, the session read as the router
// reads it (routeRequest).
func addCacheKeys(q *Request) {
	if q.Plan == nil {
		return
	}
	var key string
	var made []struct{ from, to []byte }
	q.Plan.AffinityLeaves(func(t *routing.Target) {
		if t.Settings.Provider != "openai" {
			return
		}
		for i := range q.attempts {
			p := &q.attempts[i]
			if p.target != t || p.err != nil || !cacheKeyOp(p.op) || gjson.GetBytes(p.body, "prompt_cache_key").Exists() {
				continue
			}
			if key == "" {
				if key = routing.GatewayCacheKey(routeRequest(q)); key == "" {
					return
				}
			}
			// Targets sharing a body share the keyed copy.
			var body []byte
			for _, m := range made {
				if len(m.from) == len(p.body) && unsafe.SliceData(m.from) == unsafe.SliceData(p.body) {
					body = m.to
				}
			}
			if body == nil {
				b, err := sjson.SetBytes(p.body, "prompt_cache_key", key)
				if err != nil {
					continue
				}
				made = append(made, struct{ from, to []byte }{p.body, b})
				body = b
			}
			p.body = body
		}
	})
}

// routeRequest is what the router is shown of q: the metadata, the
// client's body and path, the session header and the caller's workspace.
func routeRequest(q *Request) *routing.Request {
	rq := &routing.Request{Params: q.Call.Body, Path: q.URLPath, Session: sessionHeader(q.Call.Header)}
	if h := q.RouteHeader; h != nil {
		rq.Metadata, rq.MetadataRaw = h.Metadata, h.MetadataRaw
	}
	if q.Identity != nil {
		rq.Scope = q.Identity.WorkspaceID
	}
	return rq
}
