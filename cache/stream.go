package cache

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sse"
)

// A streamed answer is stored as the complete JSON answer it adds up to
// (not as its SSE transcript), so one entry serves streamed and
// non-streamed requests alike: Assemble builds it from the chunks, and
// Synthesize turns it back into a well-formed stream.

const (
	objChat       = "chat.completion"
	objChatChunk  = "chat.completion.chunk"
	objCompletion = "text_completion"
)

type toolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function toolCallFunction `json:"function"`
}

type message struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      *message        `json:"message,omitempty"`
	Delta        *message        `json:"delta,omitempty"`
	Text         *string         `json:"text,omitempty"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type completion struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	Choices           []choice        `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

var jsonNull = json.RawMessage("null")

// choiceAcc accumulates one choice's deltas.
type choiceAcc struct {
	role, content, refusal, text strings.Builder
	hasContent, hasRefusal       bool
	tools                        map[int]*toolCall
	finish                       *string
	logprobs                     []json.RawMessage
}

// Assemble turns the SSE transcript of a complete OpenAI chat or text
// completion stream into the JSON answer it adds up to. It reports false
// for anything it cannot vouch for: a stream without [DONE], one carrying
// an error event, or chunks of another kind.
func Assemble(transcript []byte) ([]byte, bool) {
	var out completion
	accs := map[int]*choiceAcc{}
	done, bad := false, false
	split := sse.Splitter{NoRaw: true, MaxEvent: MaxEntrySize}
	each := func(ev *sse.Event) bool {
		if !ev.HasData {
			return true
		}
		data := bytes.TrimSpace(ev.Data)
		if string(data) == "[DONE]" {
			done = true
			return true
		}
		if jsonlimit.Check(data) != nil {
			bad = true
			return false
		}
		c := gjson.ParseBytes(data)
		if c.Get("error").Exists() {
			bad = true
			return false
		}
		obj := c.Get("object").String()
		switch {
		case obj == objChatChunk && (out.Object == "" || out.Object == objChat):
			out.Object = objChat
		case obj == objCompletion && (out.Object == "" || out.Object == objCompletion):
			out.Object = objCompletion
		default:
			bad = true
			return false
		}
		if out.ID == "" {
			out.ID, out.Created, out.Model = c.Get("id").String(), c.Get("created").Int(), c.Get("model").String()
		}
		if fp := c.Get("system_fingerprint").String(); fp != "" {
			out.SystemFingerprint = fp
		}
		if u := c.Get("usage"); u.IsObject() {
			out.Usage = json.RawMessage(u.Raw)
		}
		for _, ch := range c.Get("choices").Array() {
			addChunkChoice(accs, ch)
		}
		return true
	}
	if err := split.Feed(transcript, each); err != nil {
		return nil, false
	}
	split.End(each)
	if bad || !done || out.Object == "" {
		return nil, false
	}
	out.Choices = finishChoices(accs, out.Object == objChat)
	b, err := json.Marshal(out)
	return b, err == nil
}

func addChunkChoice(accs map[int]*choiceAcc, ch gjson.Result) {
	i := int(ch.Get("index").Int())
	a := accs[i]
	if a == nil {
		a = &choiceAcc{tools: map[int]*toolCall{}}
		accs[i] = a
	}
	if t := ch.Get("text"); t.Exists() {
		a.text.WriteString(t.String())
	}
	d := ch.Get("delta")
	if r := d.Get("role").String(); r != "" && a.role.Len() == 0 {
		a.role.WriteString(r)
	}
	if c := d.Get("content"); c.Type == gjson.String {
		a.content.WriteString(c.Str)
		a.hasContent = true
	}
	if r := d.Get("refusal"); r.Type == gjson.String {
		a.refusal.WriteString(r.Str)
		a.hasRefusal = true
	}
	for _, tc := range d.Get("tool_calls").Array() {
		ti := int(tc.Get("index").Int())
		t := a.tools[ti]
		if t == nil {
			t = &toolCall{}
			a.tools[ti] = t
		}
		if id := tc.Get("id").String(); id != "" {
			t.ID = id
		}
		if typ := tc.Get("type").String(); typ != "" {
			t.Type = typ
		}
		t.Function.Name += tc.Get("function.name").String()
		t.Function.Arguments += tc.Get("function.arguments").String()
	}
	for _, lp := range ch.Get("logprobs.content").Array() {
		a.logprobs = append(a.logprobs, json.RawMessage(lp.Raw))
	}
	if f := ch.Get("finish_reason"); f.Type == gjson.String {
		s := f.Str
		a.finish = &s
	}
}

func finishChoices(accs map[int]*choiceAcc, chat bool) []choice {
	idx := make([]int, 0, len(accs))
	for i := range accs {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]choice, 0, len(idx))
	for _, i := range idx {
		a := accs[i]
		c := choice{Index: i, Logprobs: jsonNull, FinishReason: a.finish}
		if !chat {
			t := a.text.String()
			c.Text = &t
			out = append(out, c)
			continue
		}
		m := &message{Role: a.role.String()}
		if m.Role == "" {
			m.Role = "assistant"
		}
		if a.hasContent || len(a.tools) == 0 {
			s := a.content.String()
			m.Content = &s
		}
		if a.hasRefusal {
			s := a.refusal.String()
			m.Refusal = &s
		}
		tis := make([]int, 0, len(a.tools))
		for ti := range a.tools {
			tis = append(tis, ti)
		}
		sort.Ints(tis)
		for _, ti := range tis {
			t := *a.tools[ti]
			if t.Type == "" {
				t.Type = "function"
			}
			m.ToolCalls = append(m.ToolCalls, t)
		}
		if len(a.logprobs) > 0 {
			lp, _ := json.Marshal(map[string]any{"content": a.logprobs})
			c.Logprobs = lp
		}
		c.Message = m
		out = append(out, c)
	}
	return out
}

// Synthesize turns a stored chat or text completion into the SSE stream a
// streaming client expects: the content as one chunk, a chunk with the
// finish reasons, the usage chunk when the client asked for it
// (stream_options.include_usage), and data: [DONE]. It reports false for
// answers that have no stream form (embeddings).
func Synthesize(body []byte, includeUsage bool) ([]byte, bool) {
	var in completion
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, false
	}
	var events []completion
	head := completion{ID: in.ID, Created: in.Created, Model: in.Model, SystemFingerprint: in.SystemFingerprint}
	switch in.Object {
	case objChat:
		head.Object = objChatChunk
		content, finish := head, head
		for _, c := range in.Choices {
			d := &message{Role: "assistant"}
			if c.Message != nil {
				d = c.Message
				if d.Role == "" {
					d.Role = "assistant"
				}
				for j := range d.ToolCalls {
					d.ToolCalls[j].Index = &j
				}
			}
			lp := c.Logprobs
			if len(lp) == 0 {
				lp = jsonNull
			}
			content.Choices = append(content.Choices, choice{Index: c.Index, Delta: d, Logprobs: lp})
			finish.Choices = append(finish.Choices, choice{Index: c.Index, Delta: &message{}, Logprobs: jsonNull, FinishReason: c.FinishReason})
		}
		events = append(events, content, finish)
	case objCompletion:
		head.Object = objCompletion
		text := head
		for _, c := range in.Choices {
			c.Message = nil
			if len(c.Logprobs) == 0 {
				c.Logprobs = jsonNull
			}
			text.Choices = append(text.Choices, c)
		}
		events = append(events, text)
	default:
		return nil, false
	}
	if includeUsage && len(in.Usage) > 0 && string(in.Usage) != "null" {
		u := head
		u.Choices = []choice{}
		u.Usage = in.Usage
		events = append(events, u)
	}
	var b bytes.Buffer
	for _, ev := range events {
		if ev.Choices == nil {
			ev.Choices = []choice{}
		}
		j, err := json.Marshal(ev)
		if err != nil {
			return nil, false
		}
		b.WriteString("data: ")
		b.Write(j)
		b.WriteString("\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes(), true
}
