// Package semantic is the gateway's semantic cache index: which part of a
// request is embedded (EmbedText), which requests may ever share an answer
// (PartitionKey), and a bounded in-process index of embedding vectors per
// partition that maps a similar enough request to the exact-cache key of
// a stored answer (Index). The answers themselves stay in the exact cache.
package semantic

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Caps on what is embedded. A request beyond them is not cached
// semantically (it still uses the exact cache): truncating instead would
// make requests that differ only past the cut look identical.
const (
	// MaxTurns is how many conversation turns after the system prompt are
	// embedded, the latest ones; earlier turns must match exactly (they
	// are part of the partition). Portkey documents the same limit of 4.
	MaxTurns = 4
	// MaxEmbedBytes bounds the embedded text, about 4k tokens: under the
	// 8,191-token input limit of common embedding models, and long
	// texts embed too coarsely for a 0.95 similarity to mean "same
	// question".
	MaxEmbedBytes = 16 << 10
)

// split separates a chat or text-completion body into the text that is
// embedded and the rest, which must match exactly: the body with the
// embedded turns (chat) or the prompt (completions) removed. ok is false
// when the request is not eligible for the semantic cache.
//
// Chat: the leading system and developer messages, and every turn before
// the last MaxTurns, stay in the rest, so a different system prompt or
// history never shares an answer. The embedded turns must be user or
// assistant messages whose content is a string or text parts only, with
// no other fields than role, content and name (tool calls, images and
// audio cannot be compared by a text embedding), and at least one of them
// a user turn. Each turn is embedded as "role: text" (with the name when
// set), turns separated by a blank line.
//
// Completions: a prompt that is one string (or an array of one string)
// is embedded; token arrays and batches of prompts are not eligible.
//
// A body with a repeated "messages" or "prompt", or an embedded turn
// with a repeated field, is not eligible.
func split(body []byte) (text string, rest []byte, ok bool) {
	if jsonlimit.Object(body) != nil {
		return "", nil, false
	}
	root := gjson.ParseBytes(body)
	// A repeated "messages" or "prompt" is refused: the embedded copy
	// could differ from the one the provider's parser keeps.
	counts := map[string]int{}
	root.ForEach(func(k, _ gjson.Result) bool {
		if k.Str == "messages" || k.Str == "prompt" {
			counts[k.Str]++
		}
		return true
	})
	if counts["messages"] > 1 || counts["prompt"] > 1 {
		return "", nil, false
	}
	if msgs := root.Get("messages"); msgs.Exists() {
		if root.Get("prompt").Exists() || !msgs.IsArray() {
			return "", nil, false
		}
		return splitChat(root, msgs)
	}
	if p := root.Get("prompt"); p.Exists() {
		return splitCompletion(root, p)
	}
	return "", nil, false
}

func splitChat(root, msgs gjson.Result) (string, []byte, bool) {
	all := msgs.Array()
	start := 0
	for start < len(all) {
		r := all[start].Get("role").String()
		if r != "system" && r != "developer" {
			break
		}
		start++
	}
	if len(all)-start > MaxTurns {
		start = len(all) - MaxTurns
	}
	turns := all[start:]
	if len(turns) == 0 {
		return "", nil, false
	}
	var b strings.Builder
	user := false
	for i, m := range turns {
		t, ok := turnText(m)
		if !ok {
			return "", nil, false
		}
		if m.Get("role").Str == "user" {
			user = true
		}
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(t)
		if b.Len() > MaxEmbedBytes {
			return "", nil, false
		}
	}
	if !user || strings.TrimSpace(b.String()) == "" {
		return "", nil, false
	}
	// The rest: the body with "messages" holding only the turns that are
	// not embedded.
	var kept bytes.Buffer
	kept.WriteByte('[')
	for i, m := range all[:start] {
		if i > 0 {
			kept.WriteByte(',')
		}
		kept.WriteString(m.Raw)
	}
	kept.WriteByte(']')
	return b.String(), replaceMember(root, "messages", kept.Bytes()), true
}

// turnText renders one embedded turn, or reports that it cannot be
// embedded.
func turnText(m gjson.Result) (string, bool) {
	if !m.IsObject() {
		return "", false
	}
	role, name := "", ""
	var text strings.Builder
	ok := true
	seen := map[string]bool{}
	m.ForEach(func(k, v gjson.Result) bool {
		// A repeated field is refused for the same reason as in split.
		if seen[k.Str] {
			ok = false
			return false
		}
		seen[k.Str] = true
		switch k.Str {
		case "role":
			if v.Type != gjson.String || (v.Str != "user" && v.Str != "assistant") {
				ok = false
			}
			role = v.Str
		case "name":
			if v.Type != gjson.String {
				ok = false
			}
			name = v.Str
		case "content":
			ok = contentText(v, &text)
		default:
			ok = false
		}
		return ok
	})
	if !ok || role == "" {
		return "", false
	}
	if name != "" {
		role += " (" + name + ")"
	}
	return role + ": " + text.String(), true
}

// contentText appends a message content's text: a string, or an array of
// {"type":"text","text":…} parts joined by newlines.
func contentText(v gjson.Result, b *strings.Builder) bool {
	switch {
	case v.Type == gjson.String:
		b.WriteString(v.Str)
		return true
	case v.IsArray():
		ok, first := true, true
		v.ForEach(func(_, part gjson.Result) bool {
			t := part.Get("text")
			if part.Get("type").Str != "text" || t.Type != gjson.String {
				ok = false
				return false
			}
			if !first {
				b.WriteByte('\n')
			}
			first = false
			b.WriteString(t.Str)
			return b.Len() <= MaxEmbedBytes
		})
		return ok
	}
	return false
}

func splitCompletion(root, p gjson.Result) (string, []byte, bool) {
	if p.IsArray() {
		a := p.Array()
		if len(a) != 1 {
			return "", nil, false
		}
		p = a[0]
	}
	if p.Type != gjson.String || len(p.Str) > MaxEmbedBytes || strings.TrimSpace(p.Str) == "" {
		return "", nil, false
	}
	return p.Str, replaceMember(root, "prompt", nil), true
}

// replaceMember returns root's JSON with the top-level member name
// replaced by raw, or removed when raw is nil.
func replaceMember(root gjson.Result, name string, raw []byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	root.ForEach(func(k, v gjson.Result) bool {
		val := v.Raw
		if k.Str == name {
			if raw == nil {
				return true
			}
			val = string(raw)
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(k.Raw)
		b.WriteByte(':')
		b.WriteString(val)
		return true
	})
	b.WriteByte('}')
	return b.Bytes()
}

// EmbedText returns the text of a chat or text-completion request body
// that the semantic cache embeds, and false when the request is not
// eligible (see the caps MaxTurns and MaxEmbedBytes; the rules are on
// PartitionKey).
func EmbedText(body []byte) (string, bool) {
	t, _, ok := split(body)
	return t, ok
}
