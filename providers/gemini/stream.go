package gemini

import (
	"errors"
	"io"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// maxChoices bounds candidate indexes (Gemini allows at most 8
// candidates), so a hostile index cannot grow the per-choice state.
const maxChoices = 128

// stream converts a streamGenerateContent?alt=sse stream, where every
// event is a whole GenerateContentResponse holding the next parts, to
// OpenAI chunks.
type stream struct {
	provider string
	w        io.Writer
	dec      oaiwire.Decoder
	out      *oaiwire.ChunkWriter

	usage    usageMetadata
	sawUsage bool
	calls    int   // function calls so far, for generated ids
	tools    []int // per choice: function calls sent
	finished bool  // some candidate sent its finishReason
	started  bool  // the chunk id and model are fixed
	done     bool
	err      error
	scratch  []byte
}

func newStream(provider string, c *providers.Call, w io.Writer) *stream {
	include := gjson.GetBytes(c.Body, "stream_options.include_usage").Bool()
	return &stream{provider: provider, w: w, out: oaiwire.NewChunkWriter(c.Model, include)}
}

// Write implements io.Writer.
func (s *stream) Write(p []byte) (int, error) {
	if s.err == nil && !s.done {
		if err := s.dec.Feed(p, s.event); err != nil {
			s.fail(err.Error(), nil)
		}
	}
	if err := s.out.Flush(s.w); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close implements providers.StreamConverter. Gemini has no end event:
// a stream is complete when a candidate has said why it finished.
func (s *stream) Close() error {
	if s.err == nil {
		s.dec.End(s.lastEvent)
	}
	if s.err == nil && !s.done {
		s.done = true
		if s.finished {
			if s.sawUsage {
				s.out.Usage(s.usage.gateway(), nil)
			} else {
				s.out.Usage(&providers.Usage{}, nil)
			}
			s.out.Done()
		} else {
			s.err = errors.New("stream ended without a finishReason")
			s.out.Error(oaiwire.Truncated(s.provider))
		}
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

func (s *stream) fail(msg string, code any) {
	s.err = errors.New(msg)
	s.out.Error(oaiwire.StreamError(msg, "", code))
}

func (s *stream) event(_, data []byte) bool {
	if jsonlimit.Check(data) != nil {
		s.fail(s.provider+" sent a malformed stream event", nil)
		return false
	}
	r := gjson.ParseBytes(data)
	if r.IsArray() {
		// A server that ignored alt=sse may wrap events in an array.
		r = r.Get("0")
	}
	if e := r.Get("error"); e.Exists() {
		msg, code := ErrorFields([]byte(r.Raw))
		if msg == "" {
			msg = s.provider + " reported an error in the stream"
		}
		s.fail(msg, code)
		return false
	}
	if !s.started {
		s.started = true
		s.out.Init(r.Get("responseId").Str, r.Get("modelVersion").Str)
	}
	if u := r.Get("usageMetadata"); u.IsObject() {
		s.readUsage(u)
	}
	cands := r.Get("candidates")
	if !cands.Exists() {
		if r.Get("promptFeedback.blockReason").Str != "" {
			s.finished = true
			s.out.Finish(0, "content_filter")
		}
		return true
	}
	cands.ForEach(func(_, cd gjson.Result) bool {
		s.candidate(cd)
		return true
	})
	return true
}

func (s *stream) readUsage(u gjson.Result) {
	s.sawUsage = true
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "promptTokenCount":
			s.usage.PromptTokenCount = v.Int()
		case "candidatesTokenCount":
			s.usage.CandidatesTokenCount = v.Int()
		case "totalTokenCount":
			s.usage.TotalTokenCount = v.Int()
		case "cachedContentTokenCount":
			s.usage.CachedContentTokenCount = v.Int()
		case "thoughtsTokenCount":
			s.usage.ThoughtsTokenCount = v.Int()
		case "toolUsePromptTokenCount":
			s.usage.ToolUsePromptTokenCount = v.Int()
		}
		return true
	})
}

func (s *stream) candidate(cd gjson.Result) {
	idx := int(cd.Get("index").Int())
	if idx < 0 || idx >= maxChoices {
		return
	}
	for len(s.tools) <= idx {
		s.tools = append(s.tools, 0)
	}
	s.out.Role(idx)
	cd.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		if fc := p.Get("functionCall"); fc.IsObject() {
			s.functionCall(idx, fc, p.Get("thoughtSignature"))
			return true
		}
		t := p.Get("text")
		if t.Type != gjson.String || t.Str == "" {
			return true
		}
		if p.Get("thought").Bool() {
			s.out.Reasoning(idx, t.Raw)
		} else {
			s.out.Content(idx, t.Raw)
		}
		return true
	})
	if fr := cd.Get("finishReason").Str; fr != "" && fr != "FINISH_REASON_UNSPECIFIED" {
		s.finished = true
		s.out.Finish(idx, FinishReason(fr, s.tools[idx] > 0))
	}
}

// functionCall sends a whole call in one delta: Gemini never splits one.
// OpenAI numbers tool calls per choice, 0, 1, 2…
func (s *stream) functionCall(idx int, fc, sig gjson.Result) {
	id := fc.Get("id").Str
	if id == "" {
		id = callID(s.calls)
	}
	s.calls++
	ti := s.tools[idx]
	s.tools[idx]++
	raw := "{}"
	if args := fc.Get("args"); args.IsObject() {
		raw = args.Raw
	}
	s.scratch = oaiwire.AppendString(s.scratch[:0], raw)
	extra := ""
	if sig.Type == gjson.String && sig.Str != "" {
		extra = signatureExtra(sig.Raw)
	}
	s.out.ToolCall(idx, ti, id, fc.Get("name").String(), string(s.scratch), extra)
}
