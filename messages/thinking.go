package messages

import (
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// A chat target's reasoning (DeepSeek's and vLLM's reasoning_content,
// Groq's, OpenRouter's and Ollama's reasoning) becomes a
// thinking block with an empty signature: only Anthropic signs thinking,
// and a signature is what lets a thinking block be sent back to it. A
// client replaying such a block to a native target (Anthropic, Claude on
// Bedrock or Vertex AI) would have the request refused for its invalid
// signature, so the gateway takes those blocks out of the body first
// (translated targets drop every thinking block anyway). Whether there
// are any is read from the parsed request (UnsignedThinking), never by
// searching the body: that search would cost a large prompt tens of
// microseconds on every native call.

// UnsignedThinking reports whether an assistant turn of r carries a
// thinking block without a signature, in a turn that has other blocks
// (StripUnsignedThinking would remove it).
func (r *Request) UnsignedThinking() bool {
	for i := range r.Messages {
		m := &r.Messages[i]
		if m.Role != "assistant" {
			continue
		}
		unsigned := 0
		for j := range m.Content.Blocks {
			if b := &m.Content.Blocks[j]; b.Type == "thinking" && b.Signature == "" {
				unsigned++
			}
		}
		if unsigned > 0 && unsigned < len(m.Content.Blocks) {
			return true
		}
	}
	return false
}

// StripUnsignedThinking returns body without the thinking blocks of
// assistant turns whose signature is empty (or missing), so a
// conversation whose earlier turns a translated target answered can go on
// with a native one. A turn made of such blocks only is left as it is
// (removing them all would leave it empty, which is refused as well).
// body is returned unchanged, not copied, when there is nothing to strip
// or it cannot be edited. It walks the whole body: call it when
// UnsignedThinking says there is something to strip.
func StripUnsignedThinking(body []byte) []byte {
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
