package cohere

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// maxToolIndex bounds the tool call indexes a stream may use.
const maxToolIndex = 1024

// stream converts a v2 chat event stream (message-start, content-delta,
// tool-plan-delta, tool-call-start/delta/end, message-end, …) to OpenAI
// chunks.
type stream struct {
	w   io.Writer
	dec oaiwire.Decoder
	out *oaiwire.ChunkWriter

	usage    usage
	sawUsage bool
	tools    map[int64]int // Cohere's tool index → OpenAI tool call index
	nextTool int
	lastTool int
	complete bool
	closed   bool
	err      error
}

func newStream(c *providers.Call, w io.Writer) *stream {
	include := gjson.GetBytes(c.Body, "stream_options.include_usage").Bool()
	return &stream{w: w, out: oaiwire.NewChunkWriter(c.Model, include), lastTool: -1}
}

// Write implements io.Writer.
func (s *stream) Write(p []byte) (int, error) {
	if s.err == nil && !s.complete {
		if err := s.dec.Feed(p, s.event); err != nil {
			s.fail(err.Error())
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
	case s.complete:
		if s.sawUsage {
			s.out.Usage(s.usage.gateway(), nil)
		} else {
			s.out.Usage(&providers.Usage{}, nil)
		}
		s.out.Done()
	default:
		s.err = errors.New("stream ended before message-end")
		s.out.Error(oaiwire.Truncated(Slug))
	}
	if err := s.out.Flush(s.w); err != nil {
		return err
	}
	return s.err
}

// lastEvent handles the event the body ended in without its blank
// line: half an event is the stream cut short (reported as truncated,
// as when the body ends between events), not a malformed event.
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

func (s *stream) fail(msg string) {
	s.err = errors.New(msg)
	s.out.Error(oaiwire.StreamError(msg, "", nil))
}

func (s *stream) event(name, data []byte) bool {
	if jsonlimit.Check(data) != nil {
		s.fail("cohere sent a malformed stream event")
		return false
	}
	r := gjson.ParseBytes(data)
	typ := r.Get("type").Str
	if typ == "" {
		typ = string(name)
	}
	msg := r.Get("delta.message")
	switch typ {
	case "message-start":
		s.out.Init(r.Get("id").Str, "")
		s.out.Role(0)
	case "content-delta":
		c := msg.Get("content")
		if t := c.Get("text"); t.Type == gjson.String && t.Str != "" {
			s.out.Content(0, t.Raw)
		} else if t := c.Get("thinking"); t.Type == gjson.String && t.Str != "" {
			s.out.Reasoning(0, t.Raw)
		}
	case "tool-plan-delta":
		if t := msg.Get("tool_plan"); t.Type == gjson.String && t.Str != "" {
			s.out.Content(0, t.Raw)
		}
	case "tool-call-start":
		s.toolStart(r.Get("index").Int(), msg.Get("tool_calls"))
	case "tool-call-delta":
		s.toolDelta(r.Get("index").Int(), msg.Get("tool_calls.function.arguments"))
	case "message-end":
		return s.end(r.Get("delta"))
	case "error":
		m := r.Get("message").String()
		if m == "" {
			m = "cohere reported an error in the stream"
		}
		s.fail(m)
		return false
	}
	// content-start/end, tool-call-end, citation-*, debug: nothing to send.
	return true
}

func (s *stream) toolStart(idx int64, tc gjson.Result) {
	if s.tools == nil {
		s.tools = make(map[int64]int, 2)
	}
	ti := s.nextTool
	s.nextTool++
	if idx >= 0 && idx < maxToolIndex {
		if _, dup := s.tools[idx]; !dup {
			s.tools[idx] = ti
		}
	}
	s.lastTool = ti
	s.out.ToolStart(0, ti, tc.Get("id").String(), tc.Get("function.name").String())
	if a := tc.Get("function.arguments"); a.Type == gjson.String && a.Str != "" {
		s.out.ToolArgs(0, ti, a.Raw)
	}
}

func (s *stream) toolDelta(idx int64, args gjson.Result) {
	if args.Type != gjson.String || args.Str == "" {
		return
	}
	ti, ok := s.tools[idx]
	if !ok {
		ti = s.lastTool
	}
	if ti < 0 {
		return
	}
	s.out.ToolArgs(0, ti, args.Raw)
}

func (s *stream) end(d gjson.Result) bool {
	if u := d.Get("usage"); u.IsObject() {
		s.sawUsage = true
		s.usage = usage{}
		_ = json.Unmarshal([]byte(u.Raw), &s.usage)
	}
	fr := d.Get("finish_reason").Str
	if fr == "ERROR" {
		m := d.Get("error").String()
		if m == "" {
			m = "cohere ended the stream with an error"
		}
		s.fail(m)
		return false
	}
	s.complete = true
	s.out.Finish(0, FinishReason(fr))
	// The usage chunk and [DONE] wait for Close, so the client does not
	// hang up while the gateway still reads the upstream body.
	return false
}
