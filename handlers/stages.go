package handlers

import (
	"context"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Named stages of the pipeline. The core is parse → plan → run → finish;
// stages plug in around it without the core knowing what they do:
//
//	parse ─ plan ─ BeforeCheck… ─ FormatAdapter.ToChat (translated targets) ─ run (router, cache, attempts)
//	      ─ AfterCheck… (sync) ─ respond (FormatAdapter.FromChat/Stream per target) ─ AfterCheck… (async) ─ log
//
// A Gateway's StageSource picks the stages of each request once it is
// parsed (from the gateway key, the plan's before/after hooks, the path…).
// A nil StageSource, a nil *Stages and empty lists cost nothing: no
// allocation, no answer held for them.
//
// A config's own hooks and guardrails are not stages: they belong to each
// leaf target and run inside run, per attempted target, around the cache
// and the provider call (guardStep in guardrails.go), so that their 446 is
// an attempt outcome retries and fallbacks see.

// StageSource chooses the stages of a request. It is called once per
// request, after parsing and before planning; it must not change q.
type StageSource interface {
	Stages(q *Request) *Stages
}

// Stages are the optional steps of one request.
type Stages struct {
	// Before run in order after the plan is built and before any
	// provider is called.
	Before []BeforeCheck
	// After run in order on the final answer.
	After []AfterCheck
	// Adapter, when set, serves the request in another API's format,
	// per target (see FormatAdapter). Responses API requests get the
	// gateway's own adapter when no stage gives one.
	Adapter FormatAdapter
}

// BeforeCheck inspects a request before routing.
type BeforeCheck interface {
	// Before may deny the request by returning an error (an
	// *apierror.Error chooses the status; any other error is a 400 with
	// its text), or replace the body every target is sent by returning
	// a non-nil body, which must be a JSON object. It must not change q.
	Before(ctx context.Context, q *Request) (body []byte, err error)
}

// AfterCheck inspects the final answer.
type AfterCheck interface {
	// After may deny a held answer by returning an error (the client then
	// gets that error instead), and may annotate the request's log entry
	// with fields. Answers that were streamed or passed through already
	// reached the client: a denial of those is logged, not sent.
	After(ctx context.Context, q *Request, a *Answer) (annotations []zap.Field, err error)
	// Async reports whether the check only observes. An asynchronous
	// check runs after the answer was sent, in its own goroutine, on a
	// copy of the answer; it cannot deny, and its annotations are not
	// logged with the request. Synchronous checks make the gateway hold
	// every non-stream success until they have run.
	Async() bool
}

// Answer is the final answer of a request as after-request checks see it.
type Answer struct {
	Status int
	Header http.Header
	// Body is the complete answer when it was held (nil when it was
	// streamed or passed through).
	Body []byte
	// Streamed reports that the answer already reached the client.
	Streamed bool
	Provider string
	Model    string
	Usage    *providers.Usage
}

// FormatAdapter serves another API's format (the Responses API, for one)
// per leaf target: a target that speaks the format itself is sent the
// client's request as it is; every other target is sent the chat
// completion the adapter converts it to, and its chat answer or stream is
// converted back. So a fallback may cross from a native target to a
// translated one. One adapter serves one request.
type FormatAdapter interface {
	// Native reports whether t takes the client's request as sent.
	Native(t *routing.Target) bool
	// ToChat returns the chat completions body of the translated
	// targets. It is called at most once per request, after the
	// before-request checks, with the body they left, and only when
	// some leaf target is translated.
	ToChat(ctx context.Context, body []byte) ([]byte, error)
	// Overflow is asked about an error a translated target answered
	// (status and its OpenAI-envelope body): retry is a shorter chat
	// body to try once more on the same target; replace is the answer
	// to give instead; both nil leave the answer as it is. retried
	// reports that the answer is that of the retry.
	Overflow(status int, body []byte, retried bool) (retry []byte, replace *apierror.Error)
	// FromChat converts a complete chat completion answer back.
	FromChat(ctx context.Context, chat []byte) ([]byte, error)
	// Stream returns a writer that takes the chat completion's SSE bytes
	// and writes the client's stream format to w.
	Stream(ctx context.Context, w io.Writer) AdaptedStream
}

// AdaptedStream converts one chat completion stream.
type AdaptedStream interface {
	io.Writer
	// Close ends the client's stream; failed, when set, says the chat
	// stream broke off, and the client's stream then ends as failed.
	Close(failed error) error
}

// adaptTargets gives every translated leaf target of q its chat body
// (override_params merged into it). When no leaf is native, a body that
// cannot be made is the client's error before any call; otherwise it
// fails only the translated targets, when they are attempted.
func adaptTargets(ctx context.Context, q *Request) error {
	ad := q.adapter
	var chat []byte
	var chatErr error
	made, native := false, false
	for _, t := range q.Plan.Leaves {
		if ad.Native(t) {
			native = true
			continue
		}
		if !made {
			chat, chatErr = ad.ToChat(ctx, q.Call.Body)
			chatErr = stageErrorOrNil(chatErr)
			made = true
		}
		tb := &targetBody{body: chat, err: chatErr, op: providers.OpChat, adapted: true}
		if chatErr == nil {
			if len(t.OverrideParams) > 0 {
				tb.body = applyOverrides(tb.body, t.OverrideParams)
			}
			tb.model, tb.stream = readModelStream(tb.body)
		}
		if q.bodies == nil {
			q.bodies = make(map[*routing.Target]*targetBody, len(q.Plan.Leaves))
		}
		q.bodies[t] = tb
	}
	if !native && chatErr != nil {
		return chatErr
	}
	return nil
}

func stageErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return stageError(err)
}

// runBefore runs the before-request checks on q, in order; the last body
// a check returned replaces q's body.
func runBefore(ctx context.Context, checks []BeforeCheck, q *Request) error {
	for _, ch := range checks {
		body, err := ch.Before(ctx, q)
		if err != nil {
			return stageError(err)
		}
		if body != nil {
			q.Call.Body = body
			if err := inspectChat(&q.Call); err != nil {
				return err
			}
		}
	}
	return nil
}

// runAfter runs the synchronous after-request checks on a, in order, and
// starts the asynchronous ones once the answer was sent (after is then
// true). It returns the annotations and the first denial.
func runAfter(ctx context.Context, checks []AfterCheck, q *Request, a *Answer, async bool) ([]zap.Field, error) {
	var notes []zap.Field
	for _, ch := range checks {
		if ch.Async() != async {
			continue
		}
		if async {
			cp := *a
			cp.Body = append([]byte(nil), a.Body...)
			go func() { _, _ = ch.After(context.WithoutCancel(ctx), q, &cp) }()
			continue
		}
		n, err := ch.After(ctx, q, a)
		notes = append(notes, n...)
		if err != nil {
			return notes, stageError(err)
		}
	}
	return notes, nil
}

// stageError turns a stage's error into the client's: an *apierror.Error
// as it is, anything else a 400 with its text.
func stageError(err error) error {
	if e, ok := err.(*apierror.Error); ok {
		return e
	}
	return apierror.BadRequest("", "%s", err.Error())
}

// inspectChat re-reads model and stream from a body a stage replaced,
// with the same checks as a client's body.
func inspectChat(c *providers.Call) error {
	if err := checkJSONObject(c.Body); err != nil {
		return err
	}
	c.Model, c.Stream = readModelStream(c.Body)
	return nil
}
