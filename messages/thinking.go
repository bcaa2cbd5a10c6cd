package messages

import (
	"bytes"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// A chat target's reasoning (DeepSeek's, vLLM's and Groq's
// reasoning_content, OpenRouter's and Ollama's reasoning) becomes a
// thinking block with an empty signature: only Anthropic signs thinking,
// and a signature is what lets a thinking block be sent back to it. A
// client replaying such a block to a native target (Anthropic, Claude on
// Bedrock or Vertex AI) would have the request refused for its invalid
// signature, so StripUnsignedThinking takes those blocks out of a native
// body first.

// unsignedMarks are how an empty signature appears in a client's body:
// SDKs write JSON compactly; the spaced form is the common
// pretty-printed one. A body with neither is passed untouched, at the
// cost of two searches.
var unsignedMarks = [...][]byte{[]byte(`"signature":""`), []byte(`"signature": ""`)}

// StripUnsignedThinking returns body without the thinking blocks of
// assistant turns whose signature is empty (or missing), so a
// conversation whose earlier turns a translated target answered can go on
// with a native one. A turn made of such blocks only is left as it is
// (removing them all would leave it empty, which is refused as well).
// body is returned unchanged, not copied, when there is nothing to strip
// or it cannot be edited.
func StripUnsignedThinking(body []byte) []byte {
	if !bytes.Contains(body, unsignedMarks[0]) && !bytes.Contains(body, unsignedMarks[1]) {
		return body
	}
	var paths []string
	gjson.GetBytes(body, "messages").ForEach(func(i, m gjson.Result) bool {
		content := m.Get("content")
		if m.Get("role").Str != "assistant" || !content.IsArray() {
			return true
		}
		var drop []int
		n := 0
		content.ForEach(func(j, b gjson.Result) bool {
			n++
			if b.Get("type").Str == "thinking" && b.Get("signature").Str == "" {
				drop = append(drop, int(j.Int()))
			}
			return true
		})
		if len(drop) == n {
			return true
		}
		// Last block first: deleting one does not move the ones before.
		for k := len(drop) - 1; k >= 0; k-- {
			paths = append(paths, "messages."+strconv.FormatInt(i.Int(), 10)+".content."+strconv.Itoa(drop[k]))
		}
		return true
	})
	out := body
	for _, p := range paths {
		var err error
		if out, err = sjson.DeleteBytes(out, p); err != nil {
			return body
		}
	}
	return out
}
