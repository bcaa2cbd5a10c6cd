package oaiwire

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// ChunkWriter builds the OpenAI chat.completion.chunk events of one
// stream. Events accumulate in a buffer that Flush writes in one call, so
// the several events one provider read produces cost one client write and
// one flush. Every chunk carries the same id (the OpenAI SDK's
// accumulator rejects a chunk whose id changes), fixed by the first Init
// or, failing that, generated when the first chunk is written.
type ChunkWriter struct {
	// IncludeUsage is true when the client sent
	// stream_options.include_usage; only then is a usage chunk written.
	IncludeUsage bool

	model   string
	created int64
	prefix  []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	buf     []byte
	scratch []byte
	roles   []bool // per choice: the role chunk was written
}

// NewChunkWriter returns a writer whose model defaults to model until
// Init names the provider's.
func NewChunkWriter(model string, includeUsage bool) *ChunkWriter {
	return &ChunkWriter{IncludeUsage: includeUsage, model: model, created: time.Now().Unix(), buf: make([]byte, 0, 512)}
}

// Init fixes the id and model of every chunk. Only the first call, before
// any chunk is written, has an effect; empty values keep the defaults.
func (w *ChunkWriter) Init(id, model string) {
	if w.prefix != nil {
		return
	}
	if model != "" {
		w.model = model
	}
	if id == "" {
		id = NewID("chatcmpl-")
	}
	p := make([]byte, 0, 96+len(id)+len(w.model))
	p = append(p, `data: {"id":`...)
	p = AppendString(p, id)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, w.created, 10)
	p = append(p, `,"model":`...)
	p = AppendString(p, w.model)
	p = append(p, `,"choices":[`...)
	w.prefix = p
}

// Chunk appends one chunk for choice whose delta has the given members
// (JSON object members without the braces) and finish reason ("" is
// null). The first chunk of a choice also carries the assistant role.
func (w *ChunkWriter) Chunk(choice int, members []byte, finish string) {
	w.Init("", "")
	for len(w.roles) <= choice {
		w.roles = append(w.roles, false)
	}
	role := !w.roles[choice]
	w.roles[choice] = true
	b := append(w.buf, w.prefix...)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(choice), 10)
	b = append(b, `,"delta":{`...)
	if role {
		b = append(b, `"role":"assistant"`...)
		if len(members) > 0 {
			b = append(b, ',')
		} else if finish == "" {
			b = append(b, `,"content":""`...)
		}
	}
	b = append(b, members...)
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, finish)
	}
	w.buf = append(b, "}]}\n\n"...)
}

// Role writes the opening chunk of choice (role assistant, empty content)
// unless one was written already.
func (w *ChunkWriter) Role(choice int) {
	if choice < len(w.roles) && w.roles[choice] {
		return
	}
	w.Chunk(choice, nil, "")
}

// Content writes a text delta; raw is a JSON string literal.
func (w *ChunkWriter) Content(choice int, raw string) {
	w.field(choice, `"content":`, raw)
}

// Reasoning writes a reasoning_content delta; raw is a JSON string literal.
func (w *ChunkWriter) Reasoning(choice int, raw string) {
	w.field(choice, `"reasoning_content":`, raw)
}

func (w *ChunkWriter) field(choice int, name, raw string) {
	s := append(w.scratch[:0], name...)
	s = append(s, raw...)
	w.scratch = s
	w.Chunk(choice, s, "")
}

// ToolStart opens tool call index of choice with its id and name and
// empty arguments, as OpenAI's first delta of a call does.
func (w *ChunkWriter) ToolStart(choice, index int, id, name string) {
	w.ToolCall(choice, index, id, name, `""`, "")
}

// ToolCall writes tool call index with its id, name, arguments (argsRaw,
// a JSON string literal) and optional extra_content (raw JSON object).
func (w *ChunkWriter) ToolCall(choice, index int, id, name, argsRaw, extra string) {
	s := append(w.scratch[:0], `"tool_calls":[{"index":`...)
	s = strconv.AppendInt(s, int64(index), 10)
	s = append(s, `,"id":`...)
	s = AppendString(s, id)
	s = append(s, `,"type":"function","function":{"name":`...)
	s = AppendString(s, name)
	s = append(s, `,"arguments":`...)
	s = append(s, argsRaw...)
	s = append(s, '}')
	if len(extra) > 0 {
		s = append(s, `,"extra_content":`...)
		s = append(s, extra...)
	}
	s = append(s, "}]"...)
	w.scratch = s
	w.Chunk(choice, s, "")
}

// ToolArgs appends arguments (a JSON string literal) to tool call index.
func (w *ChunkWriter) ToolArgs(choice, index int, raw string) {
	s := append(w.scratch[:0], `"tool_calls":[{"index":`...)
	s = strconv.AppendInt(s, int64(index), 10)
	s = append(s, `,"function":{"arguments":`...)
	s = append(s, raw...)
	s = append(s, "}}]"...)
	w.scratch = s
	w.Chunk(choice, s, "")
}

// Finish writes the chunk that ends choice with reason.
func (w *ChunkWriter) Finish(choice int, reason string) {
	w.Chunk(choice, nil, reason)
}

// Usage writes the usage chunk (choices empty) when the client asked for
// it; extra, when non-nil, replaces the default usage object.
func (w *ChunkWriter) Usage(u *providers.Usage, extra *UsageOut) {
	if !w.IncludeUsage {
		return
	}
	w.Init("", "")
	out := extra
	if out == nil {
		out = UsageFrom(u)
		if out == nil {
			out = &UsageOut{}
		}
	}
	body, _ := json.Marshal(out)
	b := append(w.buf, w.prefix...)
	b = append(b, `],"usage":`...)
	b = append(b, body...)
	w.buf = append(b, "}\n\n"...)
}

// Done writes the terminating data: [DONE] event.
func (w *ChunkWriter) Done() {
	w.buf = append(w.buf, "data: [DONE]\n\n"...)
}

// Error writes an error event, which OpenAI SDKs raise as an error.
func (w *ChunkWriter) Error(e *apierror.Error) {
	w.buf = append(w.buf, e.SSEEvent()...)
}

// Flush writes the buffered events to dst, if any.
func (w *ChunkWriter) Flush(dst io.Writer) error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := dst.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}
