package guardrails

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
)

// DefaultStreamTextMax bounds the text StreamText keeps (4 MiB).
const DefaultStreamTextMax = 4 << 20

// StreamText assembles a streamed answer's text for after-request checks
// from the JSON data of its server-sent events: chat deltas
// (choices[0].delta.content), completion chunks (choices[0].text),
// Responses events (response.output_text.delta) and messages events
// (content_block_delta). Text beyond Max (DefaultStreamTextMax when 0) is
// dropped and Truncated reports it. The zero value is ready to use.
type StreamText struct {
	Max       int
	b         strings.Builder
	truncated bool
}

// Add takes one event's data payload; "[DONE]" and other events are ignored.
func (s *StreamText) Add(data []byte) {
	if len(data) == 0 || data[0] != '{' {
		return
	}
	var piece string
	if c := gjson.GetBytes(data, "choices.0"); c.Exists() {
		if c.Get("index").Int() != 0 {
			return
		}
		if d := c.Get("delta.content"); d.Type == gjson.String {
			piece = d.Str
		} else {
			piece = c.Get("text").Str
		}
	} else {
		switch gjson.GetBytes(data, "type").Str {
		case "response.output_text.delta":
			piece = gjson.GetBytes(data, "delta").Str
		case "content_block_delta":
			piece = gjson.GetBytes(data, "delta.text").Str
		}
	}
	s.write(piece)
}

func (s *StreamText) write(piece string) {
	limit := s.Max
	if limit <= 0 {
		limit = DefaultStreamTextMax
	}
	if room := limit - s.b.Len(); len(piece) > room {
		piece, s.truncated = piece[:max(room, 0)], true
	}
	s.b.WriteString(piece)
}

// String is the text assembled so far.
func (s *StreamText) String() string { return s.b.String() }

// Truncated reports whether text was dropped at the cap.
func (s *StreamText) Truncated() bool { return s.truncated }

// CanDeny reports whether any sync hook of a stage could deny, so a
// streaming caller knows whether it must hold the stream until the after
// hooks' verdict. The error is the 400 Before/After would return.
func (rn *Runner) CanDeny(stage Stage, raws []json.RawMessage) (bool, error) {
	if len(raws) == 0 {
		return false, nil
	}
	hooks, err := rn.Compile(stage, raws)
	if err != nil {
		return false, compileErr(err)
	}
	for _, h := range hooks {
		if !h.Async && (h.Deny || h.OnFail.Deny || h.OnSuccess.Deny) {
			return true, nil
		}
	}
	return false, nil
}
