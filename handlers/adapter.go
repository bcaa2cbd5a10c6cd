package handlers

import (
	"context"
	"io"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Format adapters. A request in another API's format (the Responses API)
// is planned and routed like any other; its adapter decides, per leaf
// target, whether the target takes the client's body as it is or the chat
// completion the adapter makes of it, and converts a translated target's
// answer back as the responder writes it. The adapter is chosen by the
// operation (serve.go's route).
//
// Checks are not stages of the request: a config's hooks and guardrails
// belong to each leaf target and run inside the router, per attempted
// target, around the cache and the provider call (guardStep in
// guardrails.go), so that their 446 is an attempt outcome that retries
// and fallbacks see. What each leaf target is sent, the adapter's chat
// completion included, is decided once, in its attempt plan
// (attemptplan.go).

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
	// targets. It is called at most once per request, while planning,
	// and only when some leaf target is translated.
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

func stageErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return stageError(err)
}

// stageError turns an adapter's error into the client's: an
// *apierror.Error as it is, anything else a 400 with its text.
func stageError(err error) error {
	if e, ok := err.(*apierror.Error); ok {
		return e
	}
	return apierror.BadRequest("", "%s", err.Error())
}
