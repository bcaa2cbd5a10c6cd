package handlers

import (
	"context"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// step is one layer of an attempt: the sender (attempt.go) at the
// bottom, and around it the steps that need some targets (guardStep,
// cacheStep, overflowStep). Each is given the attempt's plan and passes
// it, or a copy it completed, to the next; each can be tested alone
// with a fake next step.
type step interface {
	// cached returns a stored answer to p, if the step has one.
	cached(ctx context.Context, p attemptPlan) (routing.Outcome, bool)
	// attempt runs one attempt of p.
	attempt(ctx context.Context, p attemptPlan) routing.Outcome
}

// planned is the routing.Executor of one request: each call of the
// router gets the attempt plan of its target and runs it down the
// steps.
type planned struct {
	q    *Request
	next step
}

// Cached implements routing.Executor.
func (x *planned) Cached(ctx context.Context, t *routing.Target) (routing.Outcome, bool) {
	return x.next.cached(ctx, x.q.attemptFor(t))
}

// Attempt implements routing.Executor.
func (x *planned) Attempt(ctx context.Context, t *routing.Target, try int) routing.Outcome {
	p := x.q.attemptFor(t)
	p.try = try
	return x.next.attempt(ctx, p)
}

// steps returns the executor of q's attempts: the sender, and around it
// only the steps some leaf target of q needs (a plan without hooks,
// cache or translated target costs nothing more). gs is q's hook
// session, nil without hooks.
func steps(q *Request, sender *executor, rc *responseCache, gs *guardSession) routing.Executor {
	var s step = sender
	if q.adapter != nil {
		s = overflowStep{next: s, ad: q.adapter}
	}
	for i := range q.attempts {
		if q.attempts[i].cache != nil {
			s = &cacheStep{next: s, g: sender.g, rc: rc, memo: embedMemo{caller: q}}
			break
		}
	}
	if gs != nil {
		s = &guardStep{next: s, gs: gs}
	}
	// Kept in q: the executor lives as long as the request, and an
	// interface made of a fresh value would cost an allocation.
	q.exec = planned{q: q, next: s}
	return &q.exec
}

// overflowStep answers a context overflow of a translated target (its
// chat answer said the conversation is too long) as the adapter says:
// with one more try on a shorter conversation, or with the adapter's own
// error.
type overflowStep struct {
	next step
	ad   FormatAdapter
}

func (s overflowStep) cached(ctx context.Context, p attemptPlan) (routing.Outcome, bool) {
	return s.next.cached(ctx, p)
}

func (s overflowStep) attempt(ctx context.Context, p attemptPlan) routing.Outcome {
	o := s.next.attempt(ctx, p)
	if !p.adapted || p.err != nil {
		return o
	}
	for retried := false; ; retried = true {
		res := resultOf(o)
		if o.Committed || res == nil || res.held == nil || res.held.status < 400 {
			return o
		}
		retry, replace := s.ad.Overflow(res.held.status, res.held.body, retried)
		switch {
		case replace != nil:
			return res.fail(replace, routing.CauseNone)
		case retry == nil || retried:
			return o
		}
		p.body = retry
		o = s.next.attempt(ctx, p)
	}
}
