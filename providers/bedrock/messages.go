package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
)

// Anthropic's Messages API on Bedrock: a /v1/messages call to a Claude
// model goes to InvokeModel (or InvokeModelWithResponseStream) with the
// client's body, the model moved to the URL, stream dropped (the action
// says it), anthropic_version set to Bedrock's and the client's
// anthropic-beta header moved into the body, where Bedrock reads it. The
// answer is Anthropic's JSON; the stream's chunk frames carry Anthropic's
// events, which are written out as Anthropic's SSE.

// messagesVersion is the anthropic_version Bedrock requires.
const messagesVersion = "bedrock-2023-05-31"

// IsClaude reports whether a Bedrock model id, inference profile id or
// ARN names an Anthropic model.
func IsClaude(model string) bool {
	return strings.Contains(model, "anthropic.") || strings.Contains(model, "claude")
}

// SpeaksMessages implements providers.MessagesSpeaker: Claude models take
// the Messages API (InvokeModel) and count_tokens (CountTokens).
func (p *Provider) SpeaksMessages(op providers.Operation, model string) bool {
	return (op == providers.OpMessages || op == providers.OpCountTokens) && IsClaude(model)
}

// messagesRequest returns the InvokeModel body of a Messages call.
func messagesRequest(c *providers.Call) ([]byte, error) {
	if !IsClaude(c.Model) {
		return nil, apierror.BadRequest("model", "/v1/messages on bedrock takes a Claude model; send other models to /v1/chat/completions")
	}
	body, err := anthropic.CloudBody(c.Body, messagesVersion, "stream")
	if err != nil {
		return nil, err
	}
	if betas := c.Header.Values("anthropic-beta"); len(betas) > 0 && !gjson.GetBytes(body, "anthropic_beta").Exists() {
		var list []string
		for _, v := range betas {
			for _, b := range strings.Split(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					list = append(list, b)
				}
			}
		}
		if body, err = sjson.SetBytes(body, "anthropic_beta", list); err != nil {
			return nil, apierror.BadRequest("", "the request body could not be prepared for bedrock")
		}
	}
	return body, nil
}

// messagesTranslator reads the usage of Messages answers and turns the
// invoke stream into Anthropic's SSE.
type messagesTranslator struct{}

var claudeNative = anthropic.Native{Provider: Slug}

// Response implements providers.Translator.
func (messagesTranslator) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	return claudeNative.Response(c, body)
}

// Error implements providers.Translator: AWS's {"message":…} in
// Anthropic's shape.
func (messagesTranslator) Error(_ *providers.Call, status int, body []byte) []byte {
	return messages.Reshape(status, body)
}

// Stream implements providers.Translator.
func (messagesTranslator) Stream(_ *providers.Call, w io.Writer) providers.StreamConverter {
	return &invokeStream{frames: newFrames(), out: anthropic.NewNativeStream(w)}
}

// invokeStream decodes InvokeModelWithResponseStream frames; each chunk's
// payload, {"bytes":"<base64 Anthropic event>"}, is written as one SSE
// event to the pass-through stream, which reads its usage.
type invokeStream struct {
	frames frames
	out    *anthropic.NativeStream
	ev     []byte
	dec    []byte
	failed bool
}

// Write implements io.Writer.
func (s *invokeStream) Write(p []byte) (int, error) {
	if s.failed {
		return len(p), nil
	}
	err := s.frames.feed(p, s.handle)
	switch err {
	case nil:
		return len(p), nil
	case errMalformedFrame, errCorruptFrame:
		return len(p), s.fail(messages.TypeAPI, "the provider sent a "+err.Error())
	}
	return 0, err
}

func (s *invokeStream) handle(m *eventstream.Message) error {
	if s.failed {
		return nil
	}
	switch header(m, ":message-type") {
	case "exception":
		name := header(m, ":exception-type")
		msg := gjson.GetBytes(m.Payload, "message").String()
		if msg == "" {
			msg = "the provider's stream failed: " + name
		}
		typ := messages.TypeAPI
		switch name {
		case "throttlingException", "ThrottlingException":
			typ = messages.TypeRateLimit
		case "serviceUnavailableException", "ModelNotReadyException":
			typ = messages.TypeOverloaded
		case "validationException", "ValidationException":
			typ = messages.TypeInvalidRequest
		}
		return s.fail(typ, msg)
	case "error":
		return s.fail(messages.TypeAPI, "the provider's stream failed: "+header(m, ":error-code"))
	}
	if header(m, ":event-type") != "chunk" {
		return nil
	}
	b64 := gjson.GetBytes(m.Payload, "bytes").Str
	n := base64.StdEncoding.DecodedLen(len(b64))
	if cap(s.dec) < n {
		s.dec = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(s.dec[:n], []byte(b64))
	if err != nil {
		return s.fail(messages.TypeAPI, "the provider sent an undecodable stream chunk")
	}
	data := s.dec[:n]
	if jsonlimit.Object(data) != nil {
		return s.fail(messages.TypeAPI, "the provider sent an invalid stream event")
	}
	if bytes.ContainsAny(data, "\r\n") {
		// A line break would end the SSE data line: compact it away.
		var b bytes.Buffer
		if json.Compact(&b, data) != nil {
			return s.fail(messages.TypeAPI, "the provider sent an invalid stream event")
		}
		data = b.Bytes()
	}
	ev := s.ev[:0]
	if typ := gjson.GetBytes(data, "type").Str; eventName(typ) {
		ev = append(ev, "event: "...)
		ev = append(ev, typ...)
		ev = append(ev, '\n')
	}
	ev = append(ev, "data: "...)
	ev = append(ev, data...)
	ev = append(ev, "\n\n"...)
	s.ev = ev
	_, err = s.out.Write(ev)
	return err
}

// fail ends the client's stream with an error event.
func (s *invokeStream) fail(typ, msg string) error {
	s.failed = true
	_, err := s.out.Write(messages.ErrorEvent(typ, msg))
	return err
}

// Close implements providers.StreamConverter.
func (s *invokeStream) Close() error {
	if !s.failed && s.frames.pending() {
		_ = s.fail(messages.TypeAPI, "the provider's stream ended inside an event")
	}
	return s.out.Close()
}

// Usage implements providers.StreamConverter.
func (s *invokeStream) Usage() *providers.Usage { return s.out.Usage() }

// UsageFinal reports whether Usage is the final count (NativeStream's).
func (s *invokeStream) UsageFinal() bool { return s.out.UsageFinal() }

// eventName reports whether an event type can be an SSE event name as it
// is: Anthropic's are lower-case words joined by underscores.
func eventName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
