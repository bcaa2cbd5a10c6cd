package anthropic

import (
	"errors"
	"io"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// maxBlocks bounds the content block indexes a stream may use, so a
// hostile index cannot grow the block table without limit.
const maxBlocks = 4096

// stream converts a Messages API event stream to OpenAI chunks.
type stream struct {
	provider string
	w        io.Writer
	dec      oaiwire.Decoder
	out      *oaiwire.ChunkWriter

	usage    usage
	sawUsage bool
	// final says message_delta's usage was read: the provider's last
	// word (message_start's counts one output token).
	final bool
	// tools maps a content block index to its OpenAI tool call index + 1
	// (0: not a tool_use block). OpenAI numbers tool calls 0, 1, 2…
	// whatever the text and thinking blocks between them.
	tools    []int
	nextTool int
	finished bool // the finish chunk was written
	complete bool // message_stop was seen
	closed   bool
	err      error
}

func newStream(provider string, c *providers.Call, w io.Writer) *stream {
	include := gjson.GetBytes(c.Body, "stream_options.include_usage").Bool()
	return &stream{provider: provider, w: w, out: oaiwire.NewChunkWriter(c.Model, include)}
}

// Write implements io.Writer: it decodes whatever complete events p
// finishes and writes their chunks in one write.
func (s *stream) Write(p []byte) (int, error) {
	if s.err == nil && !s.complete {
		if err := s.dec.Feed(p, s.event); err != nil {
			s.fail(err.Error(), "")
		}
	}
	if err := s.out.Flush(s.w); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close implements providers.StreamConverter.
func (s *stream) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if s.err == nil && !s.complete {
		s.dec.End(s.lastEvent)
	}
	switch {
	case s.err != nil:
	case s.complete || s.finished:
		// A stream that ended after message_delta lost only message_stop.
		s.end()
	default:
		s.err = errors.New("stream ended before message_stop")
		s.out.Error(oaiwire.Truncated(s.provider))
	}
	if err := s.out.Flush(s.w); err != nil {
		return err
	}
	return s.err
}

// lastEvent handles the event the body ended in without its blank
// line: half an event is the stream cut short, not a malformed event.
func (s *stream) lastEvent(name, data []byte) bool {
	if jsonlimit.Check(data) != nil {
		return false
	}
	return s.event(name, data)
}

// Usage implements providers.StreamConverter.
func (s *stream) Usage() *providers.Usage {
	if !s.sawUsage {
		return nil
	}
	return s.usage.gateway()
}

// UsageFinal reports whether Usage is the provider's final count
// (message_delta's), not message_start's.
func (s *stream) UsageFinal() bool { return s.final }

func (s *stream) fail(msg, typ string) {
	s.err = errors.New(msg)
	s.out.Error(oaiwire.StreamError(msg, typ, nil))
}

func (s *stream) end() {
	if s.sawUsage {
		s.out.Usage(nil, s.usage.openai())
	} else {
		s.out.Usage(&providers.Usage{}, nil)
	}
	s.out.Done()
}

// event handles one SSE event; it returns false once the stream is over.
func (s *stream) event(_, data []byte) bool {
	if jsonlimit.Check(data) != nil {
		s.fail(s.provider+" sent a malformed stream event", "")
		return false
	}
	r := gjson.ParseBytes(data)
	switch r.Get("type").Str {
	case "message_start":
		m := r.Get("message")
		s.out.Init(m.Get("id").Str, m.Get("model").Str)
		s.readUsage(m.Get("usage"))
		s.out.Role(0)
	case "content_block_start":
		s.blockStart(r)
	case "content_block_delta":
		s.blockDelta(r)
	case "message_delta":
		s.readUsage(r.Get("usage"))
		s.final = s.final || r.Get("usage").IsObject()
		if !s.finished {
			s.finished = true
			s.out.Finish(0, FinishReason(r.Get("delta.stop_reason").Str))
		}
	case "message_stop":
		if !s.finished {
			s.finished = true
			s.out.Finish(0, "stop")
		}
		// The usage chunk and [DONE] wait for Close: a client that sees
		// [DONE] hangs up, and it must not do so while the gateway is
		// still reading the upstream body.
		s.complete = true
		return false
	case "error":
		msg := r.Get("error.message").String()
		if msg == "" {
			msg = s.provider + " reported an error in the stream"
		}
		s.fail(msg, r.Get("error.type").String())
		return false
	}
	// ping, content_block_stop and unknown events carry nothing to send.
	return true
}

// readUsage merges a usage object: message_start has the input counts,
// message_delta the cumulative output (and, on newer API versions, input)
// counts.
func (s *stream) readUsage(u gjson.Result) {
	if !u.IsObject() {
		return
	}
	s.sawUsage = true
	readUsage(&s.usage, u)
}

func (s *stream) blockStart(r gjson.Result) {
	idx := int(r.Get("index").Int())
	cb := r.Get("content_block")
	switch cb.Get("type").Str {
	case "tool_use":
		if idx < 0 || idx >= maxBlocks {
			return
		}
		for len(s.tools) <= idx {
			s.tools = append(s.tools, 0)
		}
		ti := s.nextTool
		s.nextTool++
		s.tools[idx] = ti + 1
		s.out.ToolStart(0, ti, cb.Get("id").String(), cb.Get("name").String())
	case "text":
		if t := cb.Get("text"); t.Str != "" {
			s.out.Content(0, t.Raw)
		}
	case "thinking":
		if t := cb.Get("thinking"); t.Str != "" {
			s.out.Reasoning(0, t.Raw)
		}
	case "redacted_thinking":
		m := append([]byte(`"content_blocks":[{"index":`), strconv.Itoa(idx)...)
		m = append(m, `,"type":"redacted_thinking","data":`...)
		m = append(m, rawString(cb.Get("data"))...)
		s.out.Chunk(0, append(m, "}]"...), "")
	}
}

func (s *stream) blockDelta(r gjson.Result) {
	d := r.Get("delta")
	switch d.Get("type").Str {
	case "text_delta":
		if t := d.Get("text"); t.Str != "" {
			s.out.Content(0, t.Raw)
		}
	case "input_json_delta":
		idx := int(r.Get("index").Int())
		pj := d.Get("partial_json")
		if idx < 0 || idx >= len(s.tools) || s.tools[idx] == 0 || pj.Str == "" {
			return
		}
		s.out.ToolArgs(0, s.tools[idx]-1, pj.Raw)
	case "thinking_delta":
		// reasoning_content for OpenAI-style clients; content_blocks with
		// the block index for clients that rebuild thinking blocks.
		raw := rawString(d.Get("thinking"))
		m := append([]byte(`"reasoning_content":`), raw...)
		m = append(m, `,"content_blocks":[{"index":`...)
		m = strconv.AppendInt(m, r.Get("index").Int(), 10)
		m = append(m, `,"delta":{"thinking":`...)
		m = append(m, raw...)
		s.out.Chunk(0, append(m, "}}]"...), "")
	case "signature_delta":
		m := append([]byte(`"content_blocks":[{"index":`), strconv.FormatInt(r.Get("index").Int(), 10)...)
		m = append(m, `,"delta":{"signature":`...)
		m = append(m, rawString(d.Get("signature"))...)
		s.out.Chunk(0, append(m, "}}]"...), "")
	}
}

// rawString returns a string value's JSON literal, or "" for anything
// else, so only valid JSON strings are spliced into chunks.
func rawString(v gjson.Result) string {
	if v.Type != gjson.String {
		return `""`
	}
	return v.Raw
}
