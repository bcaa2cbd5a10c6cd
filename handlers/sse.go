package handlers

import (
	"bytes"
	"io"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

var (
	sseData      = []byte("data:")
	sseDone      = []byte("[DONE]")
	sseDoneEvent = []byte("data: [DONE]")
	sseSep       = []byte("\n\n")
)

// sseFilter passes an OpenAI-format event stream through event by event,
// noting the usage chunk and the final [DONE]. When the gateway itself
// asked the provider for usage, it drops the usage-only chunk the client
// did not ask for. It buffers at most one incomplete event.
type sseFilter struct {
	w          io.Writer
	pending    []byte
	dropUsage  bool
	sawDone    bool
	sawAny     bool
	usage      *providers.Usage
	writeError error
	// onDone, when set, runs as [DONE] is seen, before it is written.
	onDone func()
}

func (f *sseFilter) Write(p []byte) (int, error) {
	if f.writeError != nil {
		return 0, f.writeError
	}
	data := p
	if len(f.pending) > 0 {
		f.pending = append(f.pending, p...)
		data = f.pending
	}
	// Kept events are written in contiguous runs, so a chunk of several
	// events costs one write, and a dropped event splits the run.
	start, runStart, runEnd := 0, 0, 0
	for {
		i := bytes.Index(data[start:], sseSep)
		if i < 0 {
			break
		}
		end := start + i + len(sseSep)
		if f.keep(data[start:end]) {
			if runEnd != start {
				if err := f.emitRun(data[runStart:runEnd]); err != nil {
					return 0, err
				}
				runStart = start
			}
			runEnd = end
		}
		start = end
	}
	if err := f.emitRun(data[runStart:runEnd]); err != nil {
		return 0, err
	}
	rest := data[start:]
	if len(rest) == 0 {
		f.pending = f.pending[:0]
	} else if len(f.pending) > 0 {
		n := copy(f.pending, rest)
		f.pending = f.pending[:n]
	} else {
		f.pending = append(f.pending[:0], rest...)
	}
	return len(p), nil
}

func (f *sseFilter) emitRun(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return f.emit(b)
}

func (f *sseFilter) emit(b []byte) error {
	_, err := f.w.Write(b)
	f.writeError = err
	return err
}

// keep inspects one complete event and reports whether it goes to the
// client.
func (f *sseFilter) keep(ev []byte) bool {
	f.sawAny = true
	i := bytes.Index(ev, sseData)
	if i < 0 {
		return true
	}
	payload := bytes.TrimSpace(ev[i+len(sseData):])
	if bytes.Equal(payload, sseDone) {
		f.sawDone = true
		if f.onDone != nil {
			f.onDone()
		}
		return true
	}
	if !bytes.Contains(payload, []byte(`"usage"`)) {
		return true
	}
	u := gjson.GetBytes(payload, "usage")
	if !u.IsObject() {
		return true
	}
	f.usage = usageFromJSON(u)
	if f.dropUsage {
		if ch := gjson.GetBytes(payload, "choices"); ch.IsArray() && len(ch.Array()) == 0 {
			return false
		}
	}
	return true
}

// Flush writes out a trailing event that lacked its blank line.
func (f *sseFilter) Flush() error {
	if len(f.pending) == 0 {
		return nil
	}
	b := f.pending
	f.pending = f.pending[:0]
	if !f.keep(b) {
		return nil
	}
	return f.emit(b)
}

// usageFromJSON reads OpenAI's usage object (chat, completions, embeddings
// and the Responses API's input/output naming).
func usageFromJSON(u gjson.Result) *providers.Usage {
	us := &providers.Usage{
		PromptTokens:     u.Get("prompt_tokens").Int(),
		CompletionTokens: u.Get("completion_tokens").Int(),
		TotalTokens:      u.Get("total_tokens").Int(),
		CachedTokens:     u.Get("prompt_tokens_details.cached_tokens").Int(),
		ReasoningTokens:  u.Get("completion_tokens_details.reasoning_tokens").Int(),
	}
	if us.PromptTokens == 0 && us.CompletionTokens == 0 {
		us.PromptTokens = u.Get("input_tokens").Int()
		us.CompletionTokens = u.Get("output_tokens").Int()
		us.CachedTokens = u.Get("input_tokens_details.cached_tokens").Int()
		us.ReasoningTokens = u.Get("output_tokens_details.reasoning_tokens").Int()
	}
	if us.TotalTokens == 0 {
		us.TotalTokens = us.PromptTokens + us.CompletionTokens
	}
	return us
}
