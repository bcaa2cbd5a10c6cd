package handlers

import (
	"context"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// executor is the sender of one request's attempts: the last of the steps
// (steps.go), it sends an attempt plan and answers with a routing.Outcome
// whose Result is the attempt's *result. It holds only what does not
// change during the request; each attempt keeps its own state on its own
// stack.
type executor struct {
	g   *Gateway
	q   *Request
	r   *http.Request
	out *responder
	// answerLimit, when set, bounds a held answer more tightly than
	// max_response_body (the semantic cache's embedding calls).
	answerLimit int64
	// attempts counts the upstream calls made, for the trace spans.
	attempts int
	// budget bounds the bytes of answers held by all requests
	// (heldbudget.go); heldBytes is what this request's attempts took of it,
	// given back by releaseHeld when the request ends. A nil budget
	// (the semantic cache's embedding calls, bounded by answerLimit)
	// admits everything.
	budget    *app.HeldBudget
	heldBytes int64
}

// maxBody bounds an answer the attempt holds.
func (e *executor) maxBody() int64 {
	if e.answerLimit > 0 {
		return e.answerLimit
	}
	return e.g.MaxResponseBody
}

// cached implements step: the sender has no stored answers.
func (e *executor) cached(context.Context, attemptPlan) (routing.Outcome, bool) {
	return routing.Outcome{}, false
}

// result is what one attempt produced, carried back to serve in the
// routing.Outcome that ended the request.
type result struct {
	// answerInfo names the target, the try and the cache status.
	answerInfo
	// held is the answer still to be written (nil once the answer was
	// streamed or passed through to the client).
	held   *heldAnswer
	usage  *providers.Usage
	model  string
	prompt promptUse
	// err is the gateway's message for the log, when it made the failure,
	// and refusal the reason when that failure refuses the request
	// (observe.RefusalOf, or a guardrail's denial).
	err     string
	refusal string
	// hooks are the results of the attempt's hooks, when it has any.
	hooks *hookRecord
	// abort asks for the client's connection to be broken: a
	// passed-through answer broke off, and a clean end would look
	// complete.
	abort bool
	// partialUsage says usage is what a stream reported before its
	// provider's final count (Anthropic's message_start): the output
	// delivered after it is estimated (estimateBrokenStream).
	partialUsage bool
}

func (res *result) info() *answerInfo {
	if res == nil {
		return nil
	}
	return &res.answerInfo
}

// resultOf returns the executor's result carried by o, or nil.
func resultOf(o routing.Outcome) *result {
	res, _ := o.Result.(*result)
	return res
}
