package messages

import (
	"bytes"
	"io"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/byteview"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// StreamWriter receives a chat completion SSE stream (OpenAI chunks,
// ending in data: [DONE], or a data: {"error":…} event) through Write and
// writes Anthropic's event sequence to the underlying writer:
//
//	message_start, ping,
//	per content block: content_block_start, content_block_delta…, content_block_stop
//	message_delta (stop_reason, usage), message_stop
//
// Text and thinking become text_delta and thinking_delta blocks; each tool
// call a tool_use block whose arguments arrive as input_json_delta, kept
// open until the end so parallel calls may interleave (as Anthropic's
// own streams may). A chat error, or a stream that ends without [DONE],
// ends the stream with an error event instead of message_stop.
type StreamWriter struct {
	dst   io.Writer
	model string
	// stops are the request's stop_sequences; seq is the one the
	// provider said it stopped at (see FromChat).
	stops []string
	seq   string
	dec   oaiwire.Decoder
	each  oaiwire.Handler
	// out gathers the events of one Write; outp is the pooled buffer
	// it came from, given back by Close.
	out  []byte
	outp *[]byte

	started, finished bool
	// next is the index of the next content block; open is the index
	// of the open text or thinking block (-1 for none) and openKind its
	// type.
	next     int
	open     int
	openKind string
	// tools maps a chat tool call index to its open block index.
	tools   map[int64]int
	toolSeq []int
	stop    string
	usage   *providers.Usage
	err     error
	// view is the chunk being handled: scan reads the usual chunk into
	// it (chunkscan.go), the gjson walk any other, through cur, which
	// onChunk, onFirst, onChoice, onDelta and onTool fill. gjsonOnly
	// turns scan off, for the tests that compare the two.
	view                                        chunkView
	scan                                        chunkScan
	gjsonOnly                                   bool
	cur                                         chunkFields
	onChunk, onFirst, onChoice, onDelta, onTool func(k, v gjson.Result) bool
}

// NewStreamWriter returns a writer translating a chat stream for a
// request for model with stop_sequences stops into dst.
func NewStreamWriter(dst io.Writer, model string, stops []string) *StreamWriter {
	bp := outBufs.Get().(*[]byte)
	s := &StreamWriter{dst: dst, model: model, stops: stops, open: -1, out: (*bp)[:0], outp: bp}
	s.each = s.event
	s.onChunk, s.onFirst, s.onChoice, s.onDelta, s.onTool = s.chunkMember, s.firstChoice, s.choiceMember, s.deltaMember, s.toolMember
	return s
}

// Write consumes chat stream bytes; it fails only when writing to the
// underlying writer failed.
func (s *StreamWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if !s.finished {
		if err := s.dec.Feed(p, s.each); err != nil {
			s.fail(TypeAPI, "the provider's stream sent an event larger than the gateway accepts")
		}
	}
	s.flush()
	if s.err != nil {
		return 0, s.err
	}
	return len(p), nil
}

// Close ends the translation: a stream that did not end (failed says why
// reading it broke off) ends with an error event. The writer writes
// nothing after it (its buffer goes to the next stream's writer).
func (s *StreamWriter) Close(failed error) error {
	if !s.finished {
		s.dec.End(s.each)
	}
	if !s.finished {
		msg := "the provider's stream ended before it completed"
		if failed != nil {
			msg = "the provider's stream failed before it completed"
		}
		s.fail(TypeAPI, msg)
	}
	s.flush()
	if s.outp != nil && cap(s.out) <= maxPooledOut {
		*s.outp = s.out[:0]
		outBufs.Put(s.outp)
	}
	s.out, s.outp = nil, nil
	return s.err
}

// outBufs recycles the writers' output buffers. One grows to what a
// read of the provider's stream translates to, several KB when a read
// brings many chunks, and a buffer per stream (grown step by step) was
// most of what a translated stream allocated.
var outBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledOut bounds the buffers kept for reuse.
const maxPooledOut = 64 << 10

// Usage is the usage the chat stream reported, if any.
func (s *StreamWriter) Usage() *providers.Usage { return s.usage }

func (s *StreamWriter) flush() {
	if len(s.out) == 0 || s.err != nil {
		return
	}
	_, s.err = s.dst.Write(s.out)
	s.out = s.out[:0]
}

// event handles one chat stream event.
func (s *StreamWriter) event(_, data []byte) bool {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		s.end()
		return false
	}
	// Read in place: nothing taken from the chunk outlives this event
	// (its text is copied into s.out, usage into numbers). The usual
	// chunk is read by scanChunk in one pass; any other by the gjson
	// walk, which reads every chunk the same way.
	v := &s.view
	*v = chunkView{}
	if s.gjsonOnly || !s.scan.scan(data, v) {
		*v = chunkView{}
		if !s.gjsonChunk(data, v) {
			return false
		}
	}
	if !s.started {
		s.start(v.id, v.model)
	}
	if v.hasUsage {
		s.usage = chatUsage(v.usage)
	}
	if !v.choice {
		return true
	}
	if v.reasoning != "" {
		s.textDelta("thinking", v.reasoning)
	}
	if v.content != "" {
		s.textDelta("text", v.content)
	}
	if v.tools.IsArray() {
		v.tools.ForEach(s.onTool)
	}
	for _, t := range v.calls[:v.ncalls] {
		s.toolDelta(t)
	}
	if v.finish != "" {
		s.stop = StopReason(v.finish)
		if v.finish == "stop" {
			if s.seq = MatchedStop(v.matched, s.stops); s.seq != "" {
				s.stop = "stop_sequence"
			}
		}
	}
	return true
}

// gjsonChunk reads any chunk into v with gjson, which walks without
// recursion and stops at malformed JSON, so a hostile chunk costs one
// pass and gives empty values. One pass over the chunk's members, then
// its first choice's and delta's: a chunk is read once, not once per
// field, into s.cur through funcs bound once (a closure per chunk would
// allocate). A chunk that reports an error ends the stream with it, and
// gjsonChunk reports false.
func (s *StreamWriter) gjsonChunk(data []byte, v *chunkView) bool {
	s.cur = chunkFields{}
	gjson.Parse(byteview.String(data)).ForEach(s.onChunk)
	c := &s.cur
	if c.err.Exists() {
		msg := c.err.Get("message").String()
		if c.err.Type == gjson.String {
			msg = c.err.String()
		}
		if msg == "" {
			msg = "the provider's stream failed"
		}
		s.fail(TypeAPI, msg)
		return false
	}
	v.id, v.model = c.id.String(), c.model.String()
	if c.usage.IsObject() {
		v.usage, v.hasUsage = []byte(c.usage.Raw), true
	}
	if !c.choice.IsObject() {
		return true
	}
	v.choice = true
	c.choice.ForEach(s.onChoice)
	c.delta.ForEach(s.onDelta)
	v.reasoning = c.reasoning.Str
	if c.content.Type == gjson.String {
		v.content = c.content.Str
	}
	v.tools = c.tools
	if c.finish.Type == gjson.String {
		v.finish = c.finish.Str
	}
	v.matched = c.matched.Str
	return true
}

// chunkFields are the members of one chat chunk the gjson walk reads.
type chunkFields struct {
	id, model, choice, err, usage gjson.Result
	delta, finish, matched        gjson.Result
	content, reasoning, tools     gjson.Result
}

func (s *StreamWriter) chunkMember(k, v gjson.Result) bool {
	switch k.Str {
	case "id":
		s.cur.id = v
	case "model":
		s.cur.model = v
	case "choices":
		if v.IsArray() {
			v.ForEach(s.onFirst)
		}
	case "usage":
		s.cur.usage = v
	case "error":
		s.cur.err = v
	}
	return true
}

// firstChoice keeps the first element of choices and stops.
func (s *StreamWriter) firstChoice(_, v gjson.Result) bool {
	s.cur.choice = v
	return false
}

func (s *StreamWriter) choiceMember(k, v gjson.Result) bool {
	switch k.Str {
	case "delta":
		s.cur.delta = v
	case "finish_reason":
		s.cur.finish = v
	case "stop_reason", "matched_stop":
		if v.Type == gjson.String {
			s.cur.matched = v
		}
	}
	return true
}

func (s *StreamWriter) deltaMember(k, v gjson.Result) bool {
	switch k.Str {
	case "content":
		s.cur.content = v
	case "reasoning_content", "reasoning":
		if v.Type == gjson.String && v.Str != "" {
			s.cur.reasoning = v
		}
	case "tool_calls":
		s.cur.tools = v
	}
	return true
}

func (s *StreamWriter) toolMember(_, v gjson.Result) bool {
	s.toolDelta(toolCallOf(v))
	return true
}

// toolCallOf reads one chat tool call fragment as the gjson walk reads
// it.
func toolCallOf(v gjson.Result) toolCall {
	t := toolCall{index: v.Get("index").Int(), id: v.Get("id").String(), name: v.Get("function.name").String()}
	if a := v.Get("function.arguments"); a.Type == gjson.String {
		t.args = a.Str
	}
	return t
}

// start writes message_start and a ping.
func (s *StreamWriter) start(id, model string) {
	s.started = true
	if model == "" {
		model = s.model
	}
	b := append(s.out, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	b = oaiwire.AppendString(b, MessageID(id))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = oaiwire.AppendString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`+"\n\n"...)
	b = append(b, "event: ping\ndata: {\"type\":\"ping\"}\n\n"...)
	s.out = b
}

// textDelta appends text to the open block of kind ("text" or
// "thinking"), opening one first when needed.
func (s *StreamWriter) textDelta(kind, text string) {
	if s.open < 0 || s.openKind != kind {
		s.closeOpen()
		s.open, s.openKind = s.next, kind
		s.next++
		b := s.blockStart(s.open)
		if kind == "text" {
			b = append(b, `{"type":"text","text":""}}`+"\n\n"...)
		} else {
			b = append(b, `{"type":"thinking","thinking":"","signature":""}}`+"\n\n"...)
		}
		s.out = b
	}
	b := s.deltaStart(s.open)
	if kind == "text" {
		b = append(b, `{"type":"text_delta","text":`...)
	} else {
		b = append(b, `{"type":"thinking_delta","thinking":`...)
	}
	b = oaiwire.AppendString(b, text)
	s.out = append(b, "}}\n\n"...)
}

// toolDelta handles one chat tool call fragment: the first of a call
// opens its tool_use block, arguments become input_json_delta.
func (s *StreamWriter) toolDelta(t toolCall) {
	blk, ok := s.tools[t.index]
	if !ok {
		s.closeOpen()
		if s.tools == nil {
			s.tools = make(map[int64]int, 2)
		}
		blk = s.next
		s.next++
		s.tools[t.index] = blk
		s.toolSeq = append(s.toolSeq, blk)
		id := t.id
		if id == "" {
			id = oaiwire.NewID("toolu_")
		}
		b := s.blockStart(blk)
		b = append(b, `{"type":"tool_use","id":`...)
		b = oaiwire.AppendString(b, id)
		b = append(b, `,"name":`...)
		b = oaiwire.AppendString(b, t.name)
		s.out = append(b, `,"input":{}}}`+"\n\n"...)
	}
	if t.args != "" {
		b := s.deltaStart(blk)
		b = append(b, `{"type":"input_json_delta","partial_json":`...)
		b = oaiwire.AppendString(b, t.args)
		s.out = append(b, "}}\n\n"...)
	}
}

func (s *StreamWriter) blockStart(i int) []byte {
	b := append(s.out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, `,"content_block":`...)
}

func (s *StreamWriter) deltaStart(i int) []byte {
	b := append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, `,"delta":`...)
}

func (s *StreamWriter) blockStop(i int) {
	b := append(s.out, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	b = strconv.AppendInt(b, int64(i), 10)
	s.out = append(b, "}\n\n"...)
}

// closeOpen stops the open text or thinking block.
func (s *StreamWriter) closeOpen() {
	if s.open >= 0 {
		s.blockStop(s.open)
		s.open = -1
	}
}

// end writes the blocks' stops, message_delta and message_stop.
func (s *StreamWriter) end() {
	if !s.started {
		s.start("", "")
	}
	s.closeOpen()
	for _, blk := range s.toolSeq {
		s.blockStop(blk)
	}
	stop := s.stop
	if stop == "" {
		stop = "end_turn"
	}
	u := UsageOf(s.usage)
	b := append(s.out, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"...)
	b = oaiwire.AppendString(b, stop)
	b = appendStopSequence(append(b, `,"stop_sequence":`...), s.seq)
	b = append(b, `},"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreationInputTokens, 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheReadInputTokens, 10)
	b = append(b, "}}\n\n"...)
	s.out = append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	s.finished = true
}

// fail ends the stream with an error event.
func (s *StreamWriter) fail(typ, msg string) {
	if s.finished {
		return
	}
	s.finished = true
	s.out = append(s.out, ErrorEvent(typ, msg)...)
}
