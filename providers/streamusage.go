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
// It is StreamUsageParts joined into one slice.
func WithStreamUsage(body []byte) ([]byte, bool) {
	head, tail, added := StreamUsageParts(body)
	if len(tail) == 0 {
		return head, added
	}
	return append(append(make([]byte, 0, len(head)+len(tail)), head...), tail...), added
}

// StreamUsageParts is WithStreamUsage as two parts, the request being
// head followed by tail. Without stream_options (nearly every request)
// the member is appended before the closing brace without re-parsing or
// copying the body: head is body up to that brace and tail the member and
// the brace, so a large prompt is sent from where it was read.
func StreamUsageParts(body []byte) (head, tail []byte, added bool) {
	// jsonlimit.Member skips the prompt with a vector search where
	// gjson would walk it byte by byte.
	so, found := jsonlimit.Member(body, "stream_options")
	if found && gjson.GetBytes(so, "include_usage").Bool() {
		return body, nil, false
	}
	if !found {
		// The last '}' of a valid JSON object is its closing brace:
		// only white space may follow it.
		if end := bytes.LastIndexByte(body, '}'); end > 0 {
			head = bytes.TrimRight(body[:end], " \t\r\n")
			tail = make([]byte, 0, len(streamUsageMember)+1+len(body)-end)
			if head[len(head)-1] != '{' {
				tail = append(tail, ',')
			}
			tail = append(tail, streamUsageMember...)
			return head[:len(head):len(head)], append(tail, body[end:]...), true
		}
	}
	b, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	if err != nil {
		return body, nil, false
	}
	return b, nil, true
}
