package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// maxLine bounds one SSE line of the chat stream the writer buffers; the
// gateway's converters write one chunk per line, far below this.
const maxLine = 8 << 20

// StreamWriter receives a chat completion SSE stream (OpenAI chunk
// format, ending in data: [DONE] or a data: {"error":…} event) through
// Write and writes the Responses event sequence to the underlying writer:
// response.created, response.in_progress, then per output item
// output_item.added, its content or summary part, deltas and done events,
// output_item.done, and one terminal event (response.completed,
// response.incomplete or response.failed) whose response holds every
// item and the usage. Sequence numbers start at 0 and increase by one.
//
// Close must be called when the chat stream ends: it writes
// response.failed if no terminal event was written yet, so a client
// always sees one. A StreamWriter is not safe for concurrent use.
type StreamWriter struct {
	// BeforeTerminal, when set, is called with the final response just
	// before its terminal event is written, so the caller can store it
	// before the client sees the end; an error turns the terminal event
	// into response.failed.
	BeforeTerminal func(*Response) error

	dst      io.Writer
	req      *Request
	resp     *Response
	seq      int64
	pending  []byte
	buf      []byte
	started  bool
	finished bool
	finish   string
	usage    *Usage
	items    []*streamItem
	msg      *streamItem // open message item
	rs       *streamItem // open reasoning item
	tools    map[int64]*streamItem
	writeErr error
}

type streamItem struct {
	kind   string // "message", "function_call", "reasoning"
	id     string
	index  int
	text   strings.Builder
	callID string
	name   string
	extra  json.RawMessage
	done   bool
	final  Item
}

// NewStreamWriter returns a writer that translates for r into dst. dst is
// flushed after each Write that produced events when it is an
// http.Flusher.
func NewStreamWriter(dst io.Writer, r *Request) *StreamWriter {
	return &StreamWriter{dst: dst, req: r, resp: r.NewResponse(), buf: make([]byte, 0, 1024), tools: map[int64]*streamItem{}}
}

// Start writes response.created and response.in_progress now, before the
// first chat chunk, so a client sees the response begin while the
// provider is still thinking. Calling it is optional.
func (s *StreamWriter) Start() error {
	s.start("")
	return s.flush()
}

// Write consumes chat stream bytes. It returns len(p) unless writing to
// the underlying writer failed or a line exceeded the bound.
func (s *StreamWriter) Write(p []byte) (int, error) {
	if s.writeErr != nil {
		return 0, s.writeErr
	}
	s.pending = append(s.pending, p...)
	for !s.finished {
		nl := bytes.IndexByte(s.pending, '\n')
		if nl < 0 {
			break
		}
		line := bytes.TrimSuffix(s.pending[:nl], []byte{'\r'})
		s.line(line)
		s.pending = s.pending[nl+1:]
	}
	if s.finished {
		s.pending = nil
	} else if len(s.pending) > maxLine {
		s.pending = nil
		s.fail("server_error", "the provider's stream sent an event larger than the gateway accepts")
	}
	if len(s.pending) == 0 {
		s.pending = s.pending[:0]
	}
	if err := s.flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close ends the translation. If no terminal event was written (the chat
// stream ended without [DONE], or err reports that reading it failed),
// it writes response.failed. It returns the first error writing to the
// underlying writer.
func (s *StreamWriter) Close(err error) error {
	if !s.finished {
		msg := "the provider's stream ended before it was complete"
		if err != nil {
			msg = "the provider's stream failed before it was complete"
		}
		s.fail("server_error", msg)
	}
	if e := s.flush(); e != nil {
		return e
	}
	return s.writeErr
}

// Response returns the final response once a terminal event was written,
// else nil. Its Usage is what the provider reported.
func (s *StreamWriter) Response() *Response {
	if !s.finished {
		return nil
	}
	return s.resp
}

func (s *StreamWriter) flush() error {
	if len(s.buf) == 0 || s.writeErr != nil {
		return s.writeErr
	}
	_, err := s.dst.Write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		s.writeErr = err
		return err
	}
	if f, ok := s.dst.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (s *StreamWriter) line(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return // event names, comments and blank separators
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		s.complete()
		return
	}
	if len(data) == 0 {
		return
	}
	if jsonlimit.Check(data) != nil {
		s.fail("server_error", "the provider's stream sent an event the gateway could not read")
		return
	}
	c := gjson.ParseBytes(data)
	if e := c.Get("error"); e.Exists() && !c.Get("choices").Exists() {
		code := "server_error"
		if strings.Contains(e.Get("type").String(), "rate_limit") || e.Get("code").String() == "rate_limit_exceeded" {
			code = "rate_limit_exceeded"
		}
		msg := e.Get("message").String()
		if msg == "" {
			msg = "the provider failed during the stream"
		}
		s.fail(code, msg)
		return
	}
	s.start(c.Get("model").String())
	if u := c.Get("usage"); u.IsObject() {
		s.usage = usageFromChat(u)
	}
	choice := c.Get("choices.0")
	if !choice.Exists() {
		return
	}
	d := choice.Get("delta")
	if r := d.Get("reasoning_content"); r.Type == gjson.String && r.Str != "" {
		s.reasoningDelta(r)
	}
	if t := d.Get("content"); t.Type == gjson.String && t.Str != "" {
		s.textDelta(t)
	}
	if t := d.Get("refusal"); t.Type == gjson.String && t.Str != "" {
		// Carried as text: a refusal is still the model's visible answer.
		s.textDelta(t)
	}
	for _, tc := range d.Get("tool_calls").Array() {
		s.toolDelta(tc)
	}
	if f := choice.Get("finish_reason"); f.Type == gjson.String {
		s.finish = f.Str
	}
}

// start writes response.created and response.in_progress once.
func (s *StreamWriter) start(model string) {
	if s.started {
		return
	}
	s.started = true
	if model != "" {
		s.resp.Model = model
	}
	s.event(&event{Type: "response.created", Response: s.resp})
	s.event(&event{Type: "response.in_progress", Response: s.resp})
}

func (s *StreamWriter) open(kind, prefix string) *streamItem {
	it := &streamItem{kind: kind, id: s.req.NewID(prefix), index: len(s.items)}
	s.items = append(s.items, it)
	return it
}

func (s *StreamWriter) reasoningDelta(r gjson.Result) {
	if s.rs == nil {
		s.closeMessage()
		s.rs = s.open("reasoning", "rs_")
		s.event(&event{Type: "response.output_item.added", OutputIndex: &s.rs.index, Item: s.rs.snapshot("in_progress")})
		s.event(&event{Type: "response.reasoning_summary_part.added", ItemID: s.rs.id, OutputIndex: &s.rs.index, SummaryIndex: &zero, Part: emptySummary})
	}
	s.rs.text.WriteString(r.Str)
	s.delta("response.reasoning_summary_text.delta", s.rs, `,"summary_index":0,"delta":`, r.Raw)
}

func (s *StreamWriter) textDelta(t gjson.Result) {
	s.closeReasoning()
	if s.msg == nil {
		s.msg = s.open("message", "msg_")
		s.event(&event{Type: "response.output_item.added", OutputIndex: &s.msg.index, Item: s.msg.snapshot("in_progress")})
		s.event(&event{Type: "response.content_part.added", ItemID: s.msg.id, OutputIndex: &s.msg.index, ContentIndex: &zero, Part: emptyText})
	}
	s.msg.text.WriteString(t.Str)
	s.delta("response.output_text.delta", s.msg, `,"content_index":0,"delta":`, t.Raw, `,"logprobs":[]`)
}

func (s *StreamWriter) toolDelta(tc gjson.Result) {
	idx := tc.Get("index").Int()
	it := s.tools[idx]
	if it == nil {
		s.closeReasoning()
		s.closeMessage()
		it = s.open("function_call", "fc_")
		it.callID = tc.Get("id").String()
		if it.callID == "" {
			it.callID = s.req.NewID("call_")
		}
		it.name = tc.Get("function.name").String()
		it.extra = rawObject(tc.Get("extra_content"))
		s.tools[idx] = it
		s.event(&event{Type: "response.output_item.added", OutputIndex: &it.index, Item: it.snapshot("in_progress")})
	} else {
		if it.name == "" {
			it.name = tc.Get("function.name").String()
		}
		if it.extra == nil {
			it.extra = rawObject(tc.Get("extra_content"))
		}
	}
	if a := tc.Get("function.arguments"); a.Type == gjson.String && a.Str != "" && !it.done {
		it.text.WriteString(a.Str)
		s.delta("response.function_call_arguments.delta", it, `,"delta":`, a.Raw)
	}
}

func (s *StreamWriter) closeReasoning() {
	if it := s.rs; it != nil {
		s.rs = nil
		text := it.text.String()
		s.event(&event{Type: "response.reasoning_summary_text.done", ItemID: it.id, OutputIndex: &it.index, SummaryIndex: &zero, Text: &text})
		s.event(&event{Type: "response.reasoning_summary_part.done", ItemID: it.id, OutputIndex: &it.index, SummaryIndex: &zero, Part: summaryText{Type: "summary_text", Text: text}})
		s.itemDone(it, "completed")
	}
}

func (s *StreamWriter) closeMessage() {
	if it := s.msg; it != nil {
		s.msg = nil
		text := it.text.String()
		s.event(&event{Type: "response.output_text.done", ItemID: it.id, OutputIndex: &it.index, ContentIndex: &zero, Text: &text, Logprobs: emptyList})
		s.event(&event{Type: "response.content_part.done", ItemID: it.id, OutputIndex: &it.index, ContentIndex: &zero, Part: doneText(text)})
		s.itemDone(it, s.messageStatus())
	}
}

func (s *StreamWriter) messageStatus() string {
	if s.finish == "length" || s.finish == "max_tokens" {
		return "incomplete"
	}
	return "completed"
}

func (s *StreamWriter) closeTool(it *streamItem) {
	args := it.text.String()
	s.event(&event{Type: "response.function_call_arguments.done", ItemID: it.id, OutputIndex: &it.index, Name: it.name, Arguments: &args})
	s.itemDone(it, "completed")
}

func (s *StreamWriter) itemDone(it *streamItem, status string) {
	it.done = true
	it.final = it.snapshot(status)
	s.event(&event{Type: "response.output_item.done", OutputIndex: &it.index, Item: it.final})
}

// snapshot is the item as the client sees it with status.
func (it *streamItem) snapshot(status string) Item {
	done := status != "in_progress"
	switch it.kind {
	case "message":
		content := []any{}
		if done {
			content = append(content, doneText(it.text.String()))
		}
		return mustJSON(outputMessage{ID: it.id, Type: "message", Status: status, Content: content, Role: "assistant"})
	case "reasoning":
		summary := []summaryText{}
		if done {
			summary = append(summary, summaryText{Type: "summary_text", Text: it.text.String()})
		}
		return mustJSON(reasoningItem{ID: it.id, Type: "reasoning", Summary: summary})
	default:
		args := ""
		if done {
			args = it.text.String()
		}
		return mustJSON(functionCall{ID: it.id, Type: "function_call", Status: status, Arguments: args, CallID: it.callID, Name: it.name, ExtraContent: it.extra})
	}
}

// complete closes every open item and writes the terminal event for a
// stream that ended with [DONE].
func (s *StreamWriter) complete() {
	s.start("")
	s.closeReasoning()
	s.closeMessage()
	for _, it := range s.items {
		if !it.done && it.kind == "function_call" {
			s.closeTool(it)
		}
	}
	s.resp.Output = s.output()
	s.resp.Usage = s.usage
	s.resp.finish(s.finish, s.req.now())
	if s.BeforeTerminal != nil {
		if err := s.BeforeTerminal(s.resp); err != nil {
			s.fail("server_error", "the gateway could not store the response")
			return
		}
	}
	typ := "response.completed"
	if s.resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	s.finished = true
	s.event(&event{Type: typ, Response: s.resp})
}

// fail writes response.failed with the items so far (open ones marked
// incomplete).
func (s *StreamWriter) fail(code, msg string) {
	if s.finished {
		return
	}
	s.start("")
	s.finished = true
	out := make([]Item, 0, len(s.items))
	for _, it := range s.items {
		if it.done {
			out = append(out, it.final)
		} else {
			out = append(out, it.snapshot("incomplete"))
		}
	}
	s.resp.Output = out
	s.resp.Usage = s.usage
	s.resp.Status = "failed"
	s.resp.CompletedAt = nil
	s.resp.Error = &ResponseError{Code: code, Message: msg}
	s.event(&event{Type: "response.failed", Response: s.resp})
}

func (s *StreamWriter) output() []Item {
	out := make([]Item, 0, len(s.items))
	for _, it := range s.items {
		out = append(out, it.final)
	}
	return out
}

var (
	zero         = 0
	emptyList    = json.RawMessage(`[]`)
	emptyText    = doneText("")
	emptySummary = summaryText{Type: "summary_text", Text: ""}
)

func doneText(text string) outputText {
	return outputText{Type: "output_text", Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: text}
}

// event is every non-delta stream event; members a kind does not have
// stay unset and are omitted.
type event struct {
	Type           string          `json:"type"`
	SequenceNumber int64           `json:"sequence_number"`
	Response       *Response       `json:"response,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	SummaryIndex   *int            `json:"summary_index,omitempty"`
	Item           json.RawMessage `json:"item,omitempty"`
	Part           any             `json:"part,omitempty"`
	Name           string          `json:"name,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Logprobs       json.RawMessage `json:"logprobs,omitempty"`
}

func (s *StreamWriter) event(e *event) {
	e.SequenceNumber = s.seq
	s.seq++
	body, err := json.Marshal(e)
	if err != nil {
		s.writeErr = errors.New("responses: encoding a stream event failed")
		return
	}
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, e.Type...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, body...)
	s.buf = append(s.buf, "\n\n"...)
}

// delta appends a delta event without reflection: these are most of a
// stream's events. raw is the chunk's JSON string literal, copied as is.
func (s *StreamWriter) delta(typ string, it *streamItem, mid, raw string, tail ...string) {
	b := s.buf
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, s.seq, 10)
	s.seq++
	b = append(b, `,"item_id":"`...)
	b = append(b, it.id...) // gateway-made ids need no escaping
	b = append(b, `","output_index":`...)
	b = strconv.AppendInt(b, int64(it.index), 10)
	b = append(b, mid...)
	b = append(b, raw...)
	for _, t := range tail {
		b = append(b, t...)
	}
	s.buf = append(b, "}\n\n"...)
}
