package bedrock

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Event-stream framing (AWS event stream encoding): a 12-byte prelude
// (total length, headers length, prelude CRC), headers, payload and a
// 4-byte message CRC.
const (
	preludeLen = 12
	minFrame   = preludeLen + 4
	// maxFrame bounds what one frame may claim, so a corrupt length
	// cannot make the converter buffer without limit: the format allows
	// 128 KiB of headers and 16 MiB of payload.
	maxFrame = 16<<20 + 128<<10 + minFrame
)

// StreamConverter turns a ConverseStream body (binary event-stream frames,
// delivered in arbitrary slices) into OpenAI chat.completion.chunk events.
// It keeps incomplete frames until the rest arrives. An exception frame, a
// corrupt frame or a stream that ends early is written as an OpenAI error
// event, after which the stream ends without [DONE].
type StreamConverter struct {
	w            io.Writer
	frames       frames
	out          []byte // scratch for one chunk's delta
	chunk        []byte // scratch for one chunk
	prefix       []byte // chunk JSON up to and including `"choices":[`
	includeUsage bool

	usage     *providers.Usage
	tools     map[int64]int // contentBlockIndex → OpenAI tool call index
	nextTool  int
	started   bool // the role chunk was written
	stopped   bool // messageStop was seen
	failed    bool // an error event was written; the rest is discarded
	closed    bool
	streamErr error
}

// NewStreamConverter returns a converter writing chunks for the call's
// model to w. The usage chunk is written only when the client asked for it
// with stream_options.include_usage; Usage reports it either way.
func NewStreamConverter(c *providers.Call, w io.Writer) *StreamConverter {
	s := &StreamConverter{
		w:            w,
		frames:       newFrames(),
		includeUsage: gjson.GetBytes(c.Body, "stream_options.include_usage").Bool(),
		out:          make([]byte, 0, 256),
		chunk:        make([]byte, 0, 512),
	}
	p := make([]byte, 0, 128+len(c.Model))
	p = append(p, `{"id":`...)
	p = appendJSONString(p, newID())
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, now().Unix(), 10)
	p = append(p, `,"model":`...)
	p = appendJSONString(p, c.Model)
	p = append(p, `,"choices":[`...)
	s.prefix = p
	return s
}

// Write implements io.Writer. It never fails because of the stream's
// content (that is reported in-band); only a failed write to the client
// is returned.
func (s *StreamConverter) Write(p []byte) (int, error) {
	if s.failed || s.closed {
		return len(p), nil
	}
	err := s.frames.feed(p, func(m *eventstream.Message) error {
		if s.failed {
			return nil
		}
		return s.handle(m)
	})
	switch err {
	case errMalformedFrame:
		err = s.fail(apierror.TypeUpstream, "", "the provider sent a malformed event stream frame")
	case errCorruptFrame:
		err = s.fail(apierror.TypeUpstream, "", "the provider sent a corrupt event stream frame")
	}
	return len(p), err
}

// handle dispatches one decoded frame.
func (s *StreamConverter) handle(m *eventstream.Message) error {
	switch header(m, ":message-type") {
	case "exception":
		name := header(m, ":exception-type")
		msg := gjson.GetBytes(m.Payload, "message").String()
		if msg == "" {
			msg = gjson.GetBytes(m.Payload, "Message").String()
		}
		if msg == "" {
			msg = "the provider's stream failed: " + name
		}
		return s.fail(errorType(0, name), name, msg)
	case "error":
		code := header(m, ":error-code")
		msg := header(m, ":error-message")
		if msg == "" {
			msg = "the provider's stream failed: " + code
		}
		return s.fail(errorType(0, code), code, msg)
	}
	p := m.Payload
	switch header(m, ":event-type") {
	case "messageStart":
		return s.start()
	case "contentBlockStart":
		tu := gjson.GetBytes(p, "start.toolUse")
		if !tu.Exists() {
			return nil
		}
		idx := s.toolIndex(gjson.GetBytes(p, "contentBlockIndex").Int())
		if err := s.start(); err != nil {
			return err
		}
		d := append(s.out[:0], `{"tool_calls":[{"index":`...)
		d = strconv.AppendInt(d, int64(idx), 10)
		d = append(d, `,"id":`...)
		d = appendJSONString(d, tu.Get("toolUseId").String())
		d = append(d, `,"type":"function","function":{"name":`...)
		d = appendJSONString(d, tu.Get("name").String())
		d = append(d, `,"arguments":""}}]}`...)
		return s.emit(d, "")
	case "contentBlockDelta":
		delta := gjson.GetBytes(p, "delta")
		if t := delta.Get("text"); t.Exists() {
			return s.delta(`{"content":`, t.String())
		}
		if in := delta.Get("toolUse.input"); in.Exists() {
			if in.Str == "" {
				return nil // nothing to append to the arguments
			}
			idx := s.toolIndex(gjson.GetBytes(p, "contentBlockIndex").Int())
			d := append(s.out[:0], `{"tool_calls":[{"index":`...)
			d = strconv.AppendInt(d, int64(idx), 10)
			d = append(d, `,"function":{"arguments":`...)
			d = appendJSONString(d, in.String())
			d = append(d, `}}]}`...)
			return s.emit(d, "")
		}
		if t := delta.Get("reasoningContent.text"); t.Exists() {
			return s.delta(`{"reasoning_content":`, t.String())
		}
		// Reasoning signatures, redacted reasoning and citations have no
		// OpenAI chunk field.
		return nil
	case "messageStop":
		s.stopped = true
		if err := s.start(); err != nil {
			return err
		}
		return s.emit(append(s.out[:0], `{}`...), FinishReason(gjson.GetBytes(p, "stopReason").String()))
	case "metadata":
		u := gjson.GetBytes(p, "usage")
		if u.Exists() {
			s.usage = convertUsage(&cvUsage{
				InputTokens:           u.Get("inputTokens").Int(),
				OutputTokens:          u.Get("outputTokens").Int(),
				TotalTokens:           u.Get("totalTokens").Int(),
				CacheReadInputTokens:  u.Get("cacheReadInputTokens").Int(),
				CacheWriteInputTokens: u.Get("cacheWriteInputTokens").Int(),
			})
		}
	}
	// contentBlockStop and event types added later carry nothing to send.
	return nil
}

// toolIndex numbers tool blocks in the order they start, as OpenAI's
// tool_calls[].index does, whatever their position among text blocks.
func (s *StreamConverter) toolIndex(block int64) int {
	if s.tools == nil {
		s.tools = make(map[int64]int, 2)
	}
	idx, ok := s.tools[block]
	if !ok {
		idx = s.nextTool
		s.nextTool++
		s.tools[block] = idx
	}
	return idx
}

// start writes the role chunk once, before any content.
func (s *StreamConverter) start() error {
	if s.started {
		return nil
	}
	s.started = true
	return s.emit(append(s.out[:0], `{"role":"assistant","content":""}`...), "")
}

func (s *StreamConverter) delta(open, text string) error {
	if err := s.start(); err != nil {
		return err
	}
	d := append(s.out[:0], open...)
	d = appendJSONString(d, text)
	d = append(d, '}')
	return s.emit(d, "")
}

// emit writes one chunk whose delta is the JSON in delta (built in
// s.out). The chunk is assembled in s.chunk, which is reused: writers do
// not retain what they are given.
func (s *StreamConverter) emit(delta []byte, finish string) error {
	b := append(s.chunk[:0], "data: "...)
	b = append(b, s.prefix...)
	b = append(b, `{"index":0,"delta":`...)
	b = append(b, delta...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, finish)
	}
	b = append(b, "}]}\n\n"...)
	s.out, s.chunk = delta[:0], b[:0]
	_, err := s.w.Write(b)
	return err
}

// fail writes an OpenAI error event and stops the conversion: an error
// inside a stream must reach the client, never be swallowed.
func (s *StreamConverter) fail(typ, code, msg string) error {
	s.failed = true
	e := apierror.New(http.StatusBadGateway, typ, msg)
	if code != "" {
		e.Code = code
	}
	s.streamErr = errors.New("bedrock stream: " + msg)
	_, err := s.w.Write(e.SSEEvent())
	return err
}

// Close implements providers.StreamConverter: it writes the usage chunk
// (when asked for) and [DONE], or an error event if the stream ended
// before Bedrock's messageStop.
func (s *StreamConverter) Close() error {
	if s.closed {
		return s.streamErr
	}
	s.closed = true
	if s.failed {
		return s.streamErr
	}
	if s.frames.pending() || !s.stopped {
		if err := s.fail(apierror.TypeUpstream, "", "the provider's stream ended before it completed"); err != nil {
			return err
		}
		return s.streamErr
	}
	if s.includeUsage && s.usage != nil {
		b := append(s.chunk[:0], "data: "...)
		b = append(b, s.prefix...)
		b = append(b, `],"usage":`...)
		u, _ := json.Marshal(openAIUsage(s.usage))
		b = append(b, u...)
		b = append(b, "}\n\n"...)
		s.chunk = b[:0]
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(s.w, "data: [DONE]\n\n")
	return err
}

// Usage implements providers.StreamConverter.
func (s *StreamConverter) Usage() *providers.Usage { return s.usage }

func header(m *eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

// appendJSONString appends s as a JSON string; the escaping is shared
// with the other translators.
func appendJSONString(dst []byte, s string) []byte { return oaiwire.AppendString(dst, s) }

// Frame errors of feed.
var (
	errMalformedFrame = errors.New("malformed event stream frame")
	errCorruptFrame   = errors.New("corrupt event stream frame")
)

// frames cuts a binary event stream, delivered in arbitrary slices, into
// decoded messages, keeping an incomplete frame until the rest arrives.
// ConverseStream and InvokeModelWithResponseStream share it.
type frames struct {
	dec     *eventstream.Decoder
	rd      bytes.Reader
	buf     []byte // received bytes not yet decoded
	payload []byte // reused payload buffer
}

func newFrames() frames { return frames{dec: eventstream.NewDecoder()} }

// pending reports bytes of an incomplete frame.
func (f *frames) pending() bool { return len(f.buf) > 0 }

// feed decodes the complete frames p finishes, calling fn for each; it
// stops at fn's first error, or with errMalformedFrame or errCorruptFrame.
func (f *frames) feed(p []byte, fn func(*eventstream.Message) error) error {
	f.buf = append(f.buf, p...)
	off := 0
	var err error
	for err == nil && len(f.buf)-off >= preludeLen {
		total := binary.BigEndian.Uint32(f.buf[off:])
		headers := binary.BigEndian.Uint32(f.buf[off+4:])
		if total < minFrame || total > maxFrame || headers > total-minFrame {
			err = errMalformedFrame
			break
		}
		if len(f.buf)-off < int(total) {
			break // wait for the rest of the frame
		}
		f.rd.Reset(f.buf[off : off+int(total)])
		off += int(total)
		msg, derr := f.dec.Decode(&f.rd, f.payload[:0])
		if derr != nil {
			err = errCorruptFrame
			break
		}
		if cap(msg.Payload) > cap(f.payload) {
			f.payload = msg.Payload[:0]
		}
		err = fn(&msg)
	}
	// Keep only the undecoded tail, at the front of the same array.
	n := copy(f.buf, f.buf[off:])
	f.buf = f.buf[:n]
	return err
}
