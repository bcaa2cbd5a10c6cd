package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens). Its adapter sends the client's body as it
// is to targets whose provider speaks the API for the model
// (providers.MessagesSpeaker: Anthropic, Claude on Bedrock and Vertex
// AI), and a chat completion made by package messages to every other
// target, whose answer or stream it turns back into a Messages answer or
// Anthropic's event sequence. Every error of these paths, the gateway's
// own included, is written in Anthropic's shape (messagesErrors).

// HeaderTokenEstimate marks a count_tokens answer the gateway estimated
// because no target of the request can count tokens itself.
const HeaderTokenEstimate = "X-Gateway-Token-Estimate"

// messageStopEvent ends a complete Messages stream, as data: [DONE] ends
// a chat stream: a native stream's transcript is stored for the response
// cache when it is written (flushWriter), in one write or cut across two.
var messageStopEvent = []byte("event: message_stop\n")

// messagesAdapter is the FormatAdapter of one Messages API call.
type messagesAdapter struct {
	// body is the body r was parsed from.
	body []byte
	r    *messages.Request
	op   providers.Operation
}

// messagesRoute prepares a Messages API call for planning: the body is
// validated as Anthropic does (a 400 in its shape before any provider
// call, whichever target it goes to), the call's model and stream read,
// and the adapter set. A count_tokens call no target can count was
// answered already, with an estimate (countEstimate).
func (g *Gateway) messagesRoute(q *Request) error {
	mr, err := parseMessages(q)
	if err != nil {
		return err
	}
	if mr.UnsignedThinking() {
		// Thinking a translated target gave the client, replayed: a
		// native target would refuse its empty signature, and a
		// translated one drops thinking anyway, so no target is sent it.
		q.Call.Body = messages.StripUnsignedThinking(q.Call.Body)
	}
	q.adapter = &messagesAdapter{body: q.Call.Body, r: mr, op: q.Call.Op}
	return nil
}

// parseMessages validates the Messages API body of q and reads the
// call's model and stream from it.
func parseMessages(q *Request) (*messages.Request, error) {
	c := &q.Call
	if err := checkJSONObject(c.Body); err != nil {
		return nil, err
	}
	count := c.Op == providers.OpCountTokens
	mr, err := messages.Parse(c.Body, count)
	if err != nil {
		return nil, err
	}
	c.Model, c.Stream = mr.Model, mr.Stream && !count
	return mr, nil
}

// countEstimate is the local answer to a count_tokens call that no
// target of its plan can count natively: an estimate, marked as one in
// a response header. A call some target can count is routed.
func (g *Gateway) countEstimate(_ *http.Request, q *Request) (*localAnswer, error) {
	if q.Call.Op != providers.OpCountTokens {
		return nil, nil
	}
	mr, err := parseMessages(q)
	if err != nil {
		return nil, err
	}
	p, err := g.routePlan(q)
	if err != nil {
		return nil, err
	}
	if err := countAllowed(q, p, mr.Model); err != nil {
		return nil, err
	}
	a := &messagesAdapter{body: q.Call.Body, r: mr, op: q.Call.Op}
	if a.anyNative(p) {
		return nil, nil
	}
	return &localAnswer{op: providers.OpCountTokens, held: &heldAnswer{
		status: http.StatusOK,
		header: http.Header{"Content-Type": {"application/json"}, HeaderTokenEstimate: {"true"}},
		body:   messages.CountBody(countLocally(q.Call.Body, mr.Model)),
	}}, nil
}

// anyNative reports whether some leaf of p takes the call natively.
func (a *messagesAdapter) anyNative(p *routing.Plan) bool {
	for _, t := range p.Leaves {
		if a.Native(t) {
			return true
		}
	}
	return false
}

// Native implements FormatAdapter: the target's provider speaks the
// Messages API for the model it is sent (override_params may name
// another).
func (a *messagesAdapter) Native(t *routing.Target) bool {
	p, ok := providers.Lookup(t.Settings.Provider)
	if !ok {
		return false
	}
	ms, ok := p.(providers.MessagesSpeaker)
	if !ok {
		return false
	}
	model := a.r.Model
	if raw, ok := t.OverrideParams["model"]; ok {
		var m string
		if json.Unmarshal(raw, &m) == nil && m != "" {
			model = m
		}
	}
	return ms.SpeaksMessages(a.op, model)
}

// ToChat implements FormatAdapter. count_tokens has no chat counterpart:
// a target that cannot count fails (and a fallback moves on).
func (a *messagesAdapter) ToChat(_ context.Context, body []byte) ([]byte, error) {
	if a.op == providers.OpCountTokens {
		return nil, apierror.BadRequest("", "this target cannot count tokens: count_tokens is answered by Anthropic, Claude on Bedrock, Vertex AI and Gemini API targets, or estimated when the request has none").WithCode("unsupported_for_target")
	}
	r := a.r
	if !bytes.Equal(body, a.body) {
		// A before-request check replaced the body.
		var err error
		if r, err = messages.Parse(body, false); err != nil {
			return nil, err
		}
	}
	return messages.ToChat(r)
}

// Overflow implements FormatAdapter: a context overflow stays the
// target's error; the Messages API has no truncation to apply.
func (a *messagesAdapter) Overflow(int, []byte, bool) ([]byte, *apierror.Error) { return nil, nil }

// FromChat implements FormatAdapter.
func (a *messagesAdapter) FromChat(_ context.Context, chat []byte) ([]byte, error) {
	return messages.FromChat(chat, a.r.Model, a.r.StopSequences)
}

// Stream implements FormatAdapter.
func (a *messagesAdapter) Stream(_ context.Context, w io.Writer) AdaptedStream {
	return messages.NewStreamWriter(w, a.r.Model, a.r.StopSequences)
}

// messagesErrors writes the errors of the Messages API's paths in
// Anthropic's shape: its clients (the Anthropic SDKs, Claude Code) read
// no other.
type messagesErrors struct{}

// ShapeError implements ErrorShaper.
func (messagesErrors) ShapeError(status int, body []byte) []byte {
	return messages.Reshape(status, body)
}

// StreamError implements ErrorShaper.
func (messagesErrors) StreamError(e *apierror.Error) []byte {
	return messages.ErrorEvent(messages.TypeForStatus(e.Status, ""), e.Message)
}

// errorShaperFor returns the ErrorShaper of a request path, nil for the
// paths answered in OpenAI's envelope.
func errorShaperFor(path string) ErrorShaper {
	if path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/") {
		return messagesErrors{}
	}
	return nil
}

// writeShapedError writes a gateway error whose body an ErrorShaper made.
func writeShapedError(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(apierror.HeaderGatewayError, "true")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
