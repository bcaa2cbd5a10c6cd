package handlers

import (
	"context"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Attempt plans. Planning ends with one attemptPlan per leaf target of
// the routing plan: what an attempt of that target sends (operation,
// body, model, stream) and how its answer is treated (why a success is
// held, its cache request). Whatever decides what a target is sent
// contributes here, once: a prompt_id rendered, override_params merged,
// a format adapter's chat completion, a stored-only resource refused, a
// model the caller's key may not use refused (keyauth.go).
//
// The router then calls the request's executor once per attempt; the
// executor looks up the target's plan and passes a copy down the steps
// of an attempt (steps.go):
//
//	guardStep ─ cacheStep ─ overflowStep ─ sender (attempt.go)
//
// Each step may derive the copy it passes on: the hooks a before-hook
// mutator's body, the cache its sink and status label, the overflow
// retry a shorter conversation. None rewrites the request; the sender
// sends exactly the plan it is given and judges the answer.

// attemptPlan is one attempt of one leaf target, as planned and as the
// steps around the sender completed it.
type attemptPlan struct {
	target *routing.Target
	// try counts the attempts of target, from 0.
	try int
	// op, body, model and stream are what is sent.
	op     providers.Operation
	body   []byte
	model  string
	stream bool
	// prompt is the prompt version body was rendered from, if any.
	prompt promptUse
	// adapted marks the format adapter's chat completion, sent instead
	// of the client's body.
	adapted bool
	// err, when set, is why target cannot be sent: an attempt fails
	// with it, and is not retried (the next try would fail alike).
	err error
	// hold is why a success is held whole (hold.go), apart from the
	// cache's sink, which is known per attempt.
	hold holdReason
	// cache is target's cache request; nil when it does not cache.
	cache *cachedTarget
	// models, when set, narrows a model list answer to the models these
	// patterns allow (the caller's key's allow-list).
	models []string

	// Set by the steps, per attempt:
	// label is the cache status the answer reports (statusNoCache
	// unless the cache step set one).
	label string
	// sink, when set, receives a complete successful answer.
	sink answerSink
	// guard, when set, is the hook session judging a stream of target.
	guard *guardSession
}

// planAttempts makes the attempt plan of every leaf target of q. whole
// holds every non-stream success (a prompt completion's envelope, the
// semantic cache's embedding calls); rc is the response cache whose
// requests the caching targets get, nil for none. When no leaf takes
// the client's format and the adapter cannot make the chat completion,
// that is the client's error, before any call; otherwise a target that
// cannot be sent fails when it is attempted.
func (g *Gateway) planAttempts(ctx context.Context, q *Request, rc *responseCache, whole bool) error {
	leaves := q.Plan.Leaves
	if len(leaves) <= len(q.one) {
		q.attempts = q.one[:len(leaves)]
	} else {
		q.attempts = make([]attemptPlan, len(leaves))
	}
	var chat []byte
	var chatErr error
	made, native := false, q.adapter == nil
	hooks := guardedOp(q.Call.Op)
	for i, t := range leaves {
		p := &q.attempts[i]
		*p = attemptPlan{target: t, op: q.Call.Op, body: q.Call.Body, model: q.Call.Model, stream: q.Call.Stream, prompt: q.Prompt, label: statusNoCache}
		switch {
		case q.adapter != nil && !q.adapter.Native(t):
			if !made {
				chat, chatErr = q.adapter.ToChat(ctx, q.Call.Body)
				chatErr, made = stageErrorOrNil(chatErr), true
			}
			p.op, p.body, p.err, p.adapted = providers.OpChat, chat, chatErr, true
			if p.err == nil {
				p.body = applyOverrides(p.body, t.OverrideParams)
				p.model, p.stream = readModelStream(p.body)
			}
		default:
			native = true
			p.planBody(ctx, g, q)
		}
		p.hold = holdDeadline.when(t.RequestTimeoutMS > 0) |
			holdWhole.when(whole) |
			holdAdapted.when(p.adapted) |
			holdHooks.when(hooks && hooked(t)) |
			holdTranslated.when(translates(t, p.op))
		if rc != nil && p.err == nil {
			p.cache = rc.request(q, p)
		}
	}
	if !native && chatErr != nil {
		return chatErr
	}
	// A session's prompt_cache_key for OpenAI targets under affinity
	// (cachekey.go); the caller's key's model allow-list has the last
	// word; then the targets the input cannot fit are marked
	// (preflight.go).
	addCacheKeys(q)
	refuseModels(q)
	preflight(q, g.app.Prices())
	return nil
}

// planBody completes the plan of a target sent the client's format: its
// prompt rendered (chat completions only), override_params merged
// (shallowly, over the client's keys), or a resource only the gateway
// holds refused.
func (p *attemptPlan) planBody(ctx context.Context, g *Gateway, q *Request) {
	t := p.target
	render := t.PromptID != "" && q.Call.Op == providers.OpChat
	if render {
		p.body, p.prompt, p.err = renderTarget(ctx, g.app.PromptRegistry(), q, t)
	}
	if p.err == nil && len(t.OverrideParams) > 0 && jsonlimit.Check(p.body) == nil {
		p.body = applyOverrides(p.body, t.OverrideParams)
	}
	if render || len(t.OverrideParams) > 0 {
		p.model = gjson.GetBytes(p.body, "model").String()
		p.stream = gjson.GetBytes(p.body, "stream").Bool()
	}
	if p.err == nil {
		if ae := storedOnlyHere(&q.Call, t); ae != nil {
			p.err = ae
		}
	}
}

// translates reports whether t's provider answers op in a format of its
// own, which the gateway translates to OpenAI's.
func translates(t *routing.Target, op providers.Operation) bool {
	p, ok := providers.Lookup(t.Settings.Provider)
	return ok && p.Translator(op) != nil
}

// attemptFor returns the plan of an attempt of leaf target t.
func (q *Request) attemptFor(t *routing.Target) attemptPlan {
	for i := range q.attempts {
		if q.attempts[i].target == t {
			return q.attempts[i]
		}
	}
	// Not a leaf of the plan: the router never asks for one. Sent as the
	// client's call, so a mistake here is not a crash.
	return attemptPlan{target: t, op: q.Call.Op, body: q.Call.Body, model: q.Call.Model, stream: q.Call.Stream, prompt: q.Prompt, label: statusNoCache}
}

// call returns the provider call p sends: q's, with p's operation and
// body.
func (p *attemptPlan) call(q *Request) providers.Call {
	call := q.Call
	call.Op, call.Body, call.Model, call.Stream = p.op, p.body, p.model, p.stream
	if p.adapted {
		call.Method, call.Path, call.RawQuery = http.MethodPost, "/chat/completions", ""
	}
	return call
}
