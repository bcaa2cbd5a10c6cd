package anthropic

import (
	"errors"
	"io"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sse"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Native is the translator of a Messages API call sent as it is (the
// client spoke Anthropic's API, and the target does too): answers and
// streams reach the client byte for byte; it only reads their usage
// (cache reads and writes included) for the log, metrics, cost and
// limits, and checks the answer is one. Errors that are not already in
// Anthropic's shape (Vertex AI's Google envelope) are put in it. It is
// used by anthropic and, for Claude models, vertex-ai; Bedrock wraps its
// stream (bedrock.MessagesTranslator).
type Native struct {
	// Provider is the slug named in error messages.
	Provider string
}

// Response implements providers.Translator: body as it is, and its usage.
func (t Native) Response(_ *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if err := checkMessage(t.Provider, body); err != nil {
		return nil, nil, err
	}
	var u usage
	readUsage(&u, gjson.GetBytes(body, "usage"))
	return body, u.gateway(), nil
}

// Error implements providers.Translator: the client speaks Anthropic's
// API, so the error stays (or is put) in its shape.
func (t Native) Error(_ *providers.Call, status int, body []byte) []byte {
	return messages.Reshape(status, body)
}

// Stream implements providers.Translator.
func (t Native) Stream(_ *providers.Call, w io.Writer) providers.StreamConverter {
	return NewNativeStream(w)
}

// CountTokens is the translator of a native count_tokens call: its
// answer, {"input_tokens":N}, is passed as it is; it bills nothing. It is
// used by anthropic and, for Claude models, vertex-ai.
type CountTokens struct {
	// Provider is the slug named in error messages.
	Provider string
}

// Response implements providers.Translator.
func (t CountTokens) Response(_ *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if err := jsonlimit.Object(body); err != nil || gjson.GetBytes(body, "input_tokens").Type != gjson.Number {
		return nil, nil, oaiwire.MissingField(t.Provider, "input_tokens")
	}
	return body, nil, nil
}

// Error implements providers.Translator.
func (CountTokens) Error(_ *providers.Call, status int, body []byte) []byte {
	return messages.Reshape(status, body)
}

// Stream implements providers.Translator; count_tokens never streams.
func (CountTokens) Stream(_ *providers.Call, w io.Writer) providers.StreamConverter {
	return NewNativeStream(w)
}

// NativeStream passes a Messages API event stream through as it arrives,
// reading usage from message_start and message_delta. The client gets
// whole events only: an event a provider read cut in two is held until
// its end arrives (then sent byte for byte, in one write with the events
// after it), so a stream that breaks in the middle of an event ends, for
// the client, at the last whole one, and the error event that follows
// starts on its own. A stream that ends without message_stop or an error
// event gets an error event, so the client can tell it from a complete
// answer.
type NativeStream struct {
	w     io.Writer
	split sse.Splitter
	each  sse.Func
	usage usage
	// seen says some usage was read; final that message_delta's was,
	// the provider's last word on the answer (message_start's counts
	// one output token however much follows).
	seen, final bool
	// ended is set by message_stop or an error event.
	ended  bool
	failed bool
	closed bool
	err    error
	// One Write's state: held is how many bytes of an unfinished event
	// the splitter held before it (the start of the first event this
	// Write completes), took how many bytes the events it completed
	// span, and out the held start copied out of the splitter as that
	// event completes.
	held, took int
	out        []byte
}

// NewNativeStream returns a pass-through stream writing to w.
func NewNativeStream(w io.Writer) *NativeStream {
	s := &NativeStream{w: w}
	s.each = s.event
	return s
}

// Write implements io.Writer: the whole events p completes reach the
// client unchanged, in one write; an unfinished last one waits for the
// next Write.
func (s *NativeStream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.ended {
		// After the end, whatever follows passes as it is.
		return s.write(p)
	}
	held := s.split.Buffered()
	s.held, s.took, s.out = held, 0, s.out[:0]
	err := s.split.Feed(p, s.each)
	n := 0
	switch {
	case s.split.Stopped():
		// The rest of p follows the last event as it came.
		n = len(p)
	case s.took > 0:
		n = s.took - held
	}
	if len(s.out) > 0 {
		s.out = append(s.out, p[:n]...)
		if _, werr := s.write(s.out); werr != nil {
			return 0, werr
		}
	} else if n > 0 {
		if _, werr := s.write(p[:n]); werr != nil {
			return 0, werr
		}
	}
	if err != nil {
		// An event beyond the bound: the whole events before it were
		// passed, the client is told the stream failed, the rest is
		// dropped.
		s.fail("the provider's stream sent an event larger than the gateway accepts")
		return len(p), s.err
	}
	return len(p), nil
}

func (s *NativeStream) write(p []byte) (int, error) {
	if _, err := s.w.Write(p); err != nil {
		s.err = err
		return 0, err
	}
	return len(p), nil
}

// event reads one whole event on its way to the client.
func (s *NativeStream) event(ev *sse.Event) bool {
	if s.held > 0 {
		// The first event of this Write began in an earlier one: its
		// start is in the splitter's buffer only until this returns.
		s.out = append(s.out, ev.Raw[:s.held]...)
		s.held = 0
	}
	s.took += len(ev.Raw)
	if !ev.HasData {
		return true
	}
	return s.read(ev.Name, ev.Data)
}

// read takes the usage and the end of the stream from one event's name
// and data; it returns false once the stream ended.
func (s *NativeStream) read(name, data []byte) bool {
	typ := string(name)
	if typ == "" {
		typ = gjson.GetBytes(data, "type").Str
	}
	switch typ {
	case "message_start":
		s.readUsage(gjson.GetBytes(data, "message.usage"), false)
	case "message_delta":
		s.readUsage(gjson.GetBytes(data, "usage"), true)
	case "message_stop":
		s.ended = true
		return false
	case "error":
		s.ended, s.failed = true, true
		return false
	}
	return true
}

func (s *NativeStream) readUsage(u gjson.Result, final bool) {
	if u.IsObject() {
		s.seen = true
		s.final = s.final || final
		readUsage(&s.usage, u)
	}
}

// fail ends the client's stream with an error event.
func (s *NativeStream) fail(msg string) {
	s.ended, s.failed = true, true
	if _, err := s.w.Write(messages.ErrorEvent(messages.TypeAPI, msg)); err != nil {
		s.err = err
	} else {
		s.err = errors.New(msg)
	}
}

// Close implements providers.StreamConverter. A last event that lacked
// its blank line is passed when it is whole (its data JSON): as it came
// when it ends the stream, with the blank line added otherwise, so the
// error event that follows is an event of its own. Half an event is
// dropped.
func (s *NativeStream) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if !s.ended {
		s.split.End(s.last)
	}
	if !s.ended && s.err == nil {
		s.fail("the provider's stream ended before it completed")
		return s.err
	}
	if s.failed && s.err == nil {
		s.err = errors.New("the provider's stream reported an error")
	}
	return s.err
}

// last handles the event the splitter completes at the end of the body.
func (s *NativeStream) last(ev *sse.Event) bool {
	if !ev.HasData || jsonlimit.Check(ev.Data) != nil {
		return false // half an event (or none)
	}
	s.read(ev.Name, ev.Data)
	raw := ev.Raw
	if !s.ended {
		raw = sse.Terminate(raw)
	}
	_, _ = s.write(raw)
	return false
}

// Usage implements providers.StreamConverter.
func (s *NativeStream) Usage() *providers.Usage {
	if !s.seen {
		return nil
	}
	return s.usage.gateway()
}

// UsageFinal reports whether Usage is the provider's final count
// (message_delta's): before it, message_start's is the input and one
// output token, however much text followed.
func (s *NativeStream) UsageFinal() bool { return s.final }

// readUsage merges a Messages usage object into u, keeping the largest of
// each count: they are cumulative, and message_delta may report an input
// count as 0 after message_start had it.
func readUsage(u *usage, r gjson.Result) {
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "input_tokens":
			u.InputTokens = max(u.InputTokens, v.Int())
		case "output_tokens":
			u.OutputTokens = max(u.OutputTokens, v.Int())
		case "cache_read_input_tokens":
			u.CacheReadInputTokens = max(u.CacheReadInputTokens, v.Int())
		case "cache_creation_input_tokens":
			u.CacheCreationInputTokens = max(u.CacheCreationInputTokens, v.Int())
		}
		return true
	})
}

// CloudBody is a Messages request body for Claude on a cloud (Bedrock,
// Vertex AI), which names the model in the URL and the API version in
// the body: model and the members in drop are removed, and
// anthropic_version is set to version unless the client set one.
func CloudBody(body []byte, version string, drop ...string) ([]byte, error) {
	out, err := sjson.DeleteBytes(body, "model")
	for _, k := range drop {
		if err == nil && gjson.GetBytes(out, k).Exists() {
			out, err = sjson.DeleteBytes(out, k)
		}
	}
	if err == nil && !gjson.GetBytes(out, "anthropic_version").Exists() {
		out, err = sjson.SetBytes(out, "anthropic_version", version)
	}
	if err != nil {
		return nil, apierror.BadRequest("", "the request body could not be prepared for the target: %v", err)
	}
	return out, nil
}
