package providers

import (
	"bytes"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// streamUsageMember asks an OpenAI-format stream for its usage chunk.
const streamUsageMember = `"stream_options":{"include_usage":true}`

// WithStreamUsage returns body, a chat or completions request (a JSON
// object), asking the provider to end its stream with a usage chunk, and
// whether it had to be added: the gateway accounts for every stream's
// usage, and strips the chunk again when the client did not ask for it.
// Without stream_options (nearly every request) the member is appended
// before the closing brace, without re-parsing the body.
func WithStreamUsage(body []byte) ([]byte, bool) {
	// jsonlimit.Member skips the prompt with a vector search where
	// gjson would walk it byte by byte.
	so, found := jsonlimit.Member(body, "stream_options")
	if found && gjson.GetBytes(so, "include_usage").Bool() {
		return body, false
	}
	if !found {
		// The last '}' of a valid JSON object is its closing brace:
		// only white space may follow it.
		if end := bytes.LastIndexByte(body, '}'); end > 0 {
			head := bytes.TrimRight(body[:end], " \t\r\n")
			out := make([]byte, 0, len(body)+len(streamUsageMember)+1)
			out = append(out, head...)
			if head[len(head)-1] != '{' {
				out = append(out, ',')
			}
			out = append(out, streamUsageMember...)
			return append(out, body[end:]...), true
		}
	}
	b, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	if err != nil {
		return body, false
	}
	return b, true
}
