package messages

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// The response cache stores a native target's Messages stream as the
// answer it adds up to (AssembleStream), the same JSON a non-streamed
// request gets, so one entry serves both; a streamed request served from
// the cache gets that answer as Anthropic's event sequence again
// (SynthesizeStream). This is the Messages counterpart of the chat
// completion's cache.Assemble and cache.Synthesize.

// sseBlock is one content block being assembled.
type sseBlock struct {
	// start is the content_block_start's block, members in order.
	start                            map[string]json.RawMessage
	typ                              string
	text, thinking, signature, input strings.Builder
	citations                        []json.RawMessage
}

// AssembleStream turns the SSE transcript of a complete Messages stream
// (message_start … message_stop) into the Messages answer it adds up to.
// It reports false for anything it cannot vouch for: no message_stop, an
// error event, blocks out of order, a delta it does not know, tool input
// that is not JSON.
func AssembleStream(transcript []byte) ([]byte, bool) {
	var (
		msg        map[string]json.RawMessage
		blocks     []*sseBlock
		usage      = map[string]json.RawMessage{}
		stopReason = json.RawMessage("null")
		stopSeq    = json.RawMessage("null")
		done, bad  bool
	)
	each := func(name, data []byte) bool {
		if jsonlimit.Check(data) != nil {
			bad = true
			return false
		}
		ev := gjson.ParseBytes(data)
		typ := ev.Get("type").Str
		if len(name) > 0 && string(name) != typ {
			bad = true
			return false
		}
		switch typ {
		case "message_start":
			m := ev.Get("message")
			if msg != nil || !m.IsObject() || json.Unmarshal([]byte(m.Raw), &msg) != nil {
				bad = true
				return false
			}
			mergeUsage(usage, m.Get("usage"))
		case "content_block_start":
			b := &sseBlock{}
			cb := ev.Get("content_block")
			if msg == nil || ev.Get("index").Int() != int64(len(blocks)) || !cb.IsObject() || json.Unmarshal([]byte(cb.Raw), &b.start) != nil {
				bad = true
				return false
			}
			b.typ = cb.Get("type").Str
			b.text.WriteString(cb.Get("text").Str)
			b.thinking.WriteString(cb.Get("thinking").Str)
			b.signature.WriteString(cb.Get("signature").Str)
			blocks = append(blocks, b)
		case "content_block_delta":
			i := ev.Get("index").Int()
			if i < 0 || i >= int64(len(blocks)) || !blocks[i].delta(ev.Get("delta")) {
				bad = true
				return false
			}
		case "message_delta":
			d := ev.Get("delta")
			if r := d.Get("stop_reason"); r.Exists() {
				stopReason = json.RawMessage(r.Raw)
			}
			if s := d.Get("stop_sequence"); s.Exists() {
				stopSeq = json.RawMessage(s.Raw)
			}
			mergeUsage(usage, ev.Get("usage"))
		case "message_stop":
			done = true
			return false
		case "error":
			bad = true
			return false
		}
		// ping, content_block_stop, and event types added later.
		return true
	}
	var dec oaiwire.Decoder
	if dec.Feed(transcript, each) != nil {
		return nil, false
	}
	if !done && !bad {
		dec.End(each)
	}
	if bad || !done || msg == nil {
		return nil, false
	}
	content := make([]json.RawMessage, len(blocks))
	for i, b := range blocks {
		raw, ok := b.finish()
		if !ok {
			return nil, false
		}
		content[i] = raw
	}
	var err error
	if msg["content"], err = json.Marshal(content); err != nil {
		return nil, false
	}
	msg["stop_reason"], msg["stop_sequence"] = stopReason, stopSeq
	if msg["usage"], err = json.Marshal(usage); err != nil {
		return nil, false
	}
	return marshalOrdered(msg, "id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage")
}

// mergeUsage sets the members of a usage object over u: message_delta's
// counts are cumulative and replace message_start's.
func mergeUsage(u map[string]json.RawMessage, r gjson.Result) {
	r.ForEach(func(k, v gjson.Result) bool {
		u[k.Str] = json.RawMessage(v.Raw)
		return true
	})
}

// delta adds one content_block_delta to the block.
func (b *sseBlock) delta(d gjson.Result) bool {
	switch d.Get("type").Str {
	case "text_delta":
		b.text.WriteString(d.Get("text").Str)
	case "thinking_delta":
		b.thinking.WriteString(d.Get("thinking").Str)
	case "signature_delta":
		b.signature.WriteString(d.Get("signature").Str)
	case "input_json_delta":
		b.input.WriteString(d.Get("partial_json").Str)
	case "citations_delta":
		c := d.Get("citation")
		if !c.IsObject() {
			return false
		}
		b.citations = append(b.citations, json.RawMessage(c.Raw))
	default:
		return false
	}
	return true
}

// finish is the block as the answer has it.
func (b *sseBlock) finish() (json.RawMessage, bool) {
	set := func(k, v string) {
		raw, _ := json.Marshal(v)
		b.start[k] = raw
	}
	switch b.typ {
	case "text":
		set("text", b.text.String())
	case "thinking":
		set("thinking", b.thinking.String())
		set("signature", b.signature.String())
	}
	if b.input.Len() > 0 {
		in := []byte(b.input.String())
		if !json.Valid(in) {
			return nil, false
		}
		b.start["input"] = compactJSON(in)
	}
	if len(b.citations) > 0 {
		var all []json.RawMessage
		if prev, ok := b.start["citations"]; ok && string(prev) != "null" {
			if json.Unmarshal(prev, &all) != nil {
				return nil, false
			}
		}
		raw, err := json.Marshal(append(all, b.citations...))
		if err != nil {
			return nil, false
		}
		b.start["citations"] = raw
	}
	out, ok := marshalOrdered(b.start, "type", "id", "name", "text", "thinking", "signature", "input")
	return out, ok
}

// marshalOrdered writes m as a JSON object with the keys in first, in
// that order, then the others sorted.
func marshalOrdered(m map[string]json.RawMessage, first ...string) ([]byte, bool) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	put := func(k string, v json.RawMessage) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(oaiwire.AppendString(nil, k))
		b.WriteByte(':')
		b.Write(v)
	}
	seen := make(map[string]bool, len(first))
	for _, k := range first {
		seen[k] = true
		if v, ok := m[k]; ok {
			put(k, v)
		}
	}
	rest := make([]string, 0, len(m))
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		put(k, m[k])
	}
	b.WriteByte('}')
	return b.Bytes(), json.Valid(b.Bytes())
}

// SynthesizeStream turns a stored Messages answer into Anthropic's event
// sequence: message_start (the answer without its content, stop reason
// and output count), ping, each block as content_block_start, one delta
// with its content (text_delta, thinking_delta and signature_delta,
// input_json_delta; blocks of other types start whole) and
// content_block_stop, then message_delta with the stop reason, stop
// sequence and the whole usage, and message_stop. It reports false for a
// body that is not a Messages answer.
func SynthesizeStream(body []byte) ([]byte, bool) {
	if jsonlimit.Object(body) != nil {
		return nil, false
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || string(msg["type"]) != `"message"` {
		return nil, false
	}
	var content []map[string]json.RawMessage
	if json.Unmarshal(msg["content"], &content) != nil {
		return nil, false
	}
	usage := msg["usage"]
	if len(usage) == 0 || usage[0] != '{' {
		usage = json.RawMessage("{}")
	}
	stop, seq := msg["stop_reason"], msg["stop_sequence"]
	if len(stop) == 0 {
		stop = json.RawMessage("null")
	}
	if len(seq) == 0 {
		seq = json.RawMessage("null")
	}
	var startUsage map[string]json.RawMessage
	_ = json.Unmarshal(usage, &startUsage)
	if startUsage == nil {
		startUsage = map[string]json.RawMessage{}
	}
	startUsage["output_tokens"] = json.RawMessage("0")
	su, _ := marshalOrdered(startUsage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
	msg["content"], msg["stop_reason"], msg["stop_sequence"], msg["usage"] = json.RawMessage("[]"), json.RawMessage("null"), json.RawMessage("null"), su
	start, ok := marshalOrdered(msg, "id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage")
	if !ok {
		return nil, false
	}
	out := make([]byte, 0, 2*len(body)+512)
	ev := func(name string, parts ...[]byte) {
		out = append(out, "event: "...)
		out = append(out, name...)
		out = append(out, "\ndata: "...)
		for _, p := range parts {
			out = append(out, p...)
		}
		out = append(out, "\n\n"...)
	}
	ev("message_start", []byte(`{"type":"message_start","message":`), start, []byte("}"))
	ev("ping", []byte(`{"type":"ping"}`))
	for i, blk := range content {
		idx := strconv.AppendInt(nil, int64(i), 10)
		var deltas [][]byte
		str := func(k string) string {
			var s string
			_ = json.Unmarshal(blk[k], &s)
			return s
		}
		switch typ := str("type"); typ {
		case "text":
			if t := str("text"); t != "" {
				deltas = append(deltas, oaiwire.AppendString([]byte(`{"type":"text_delta","text":`), t))
			}
			blk["text"] = json.RawMessage(`""`)
		case "thinking":
			if t := str("thinking"); t != "" {
				deltas = append(deltas, oaiwire.AppendString([]byte(`{"type":"thinking_delta","thinking":`), t))
			}
			if s := str("signature"); s != "" {
				deltas = append(deltas, oaiwire.AppendString([]byte(`{"type":"signature_delta","signature":`), s))
			}
			blk["thinking"], blk["signature"] = json.RawMessage(`""`), json.RawMessage(`""`)
		case "tool_use", "server_tool_use", "mcp_tool_use":
			if in := blk["input"]; len(in) > 0 && string(in) != "{}" {
				deltas = append(deltas, oaiwire.AppendString([]byte(`{"type":"input_json_delta","partial_json":`), string(compactJSON(in))))
			}
			blk["input"] = json.RawMessage("{}")
		}
		cb, ok := marshalOrdered(blk, "type", "id", "name", "text", "thinking", "signature", "input")
		if !ok {
			return nil, false
		}
		ev("content_block_start", []byte(`{"type":"content_block_start","index":`), idx, []byte(`,"content_block":`), cb, []byte("}"))
		for _, d := range deltas {
			ev("content_block_delta", []byte(`{"type":"content_block_delta","index":`), idx, []byte(`,"delta":`), d, []byte("}}"))
		}
		ev("content_block_stop", []byte(`{"type":"content_block_stop","index":`), idx, []byte("}"))
	}
	ev("message_delta", []byte(`{"type":"message_delta","delta":{"stop_reason":`), stop, []byte(`,"stop_sequence":`), seq, []byte(`},"usage":`), usage, []byte("}"))
	ev("message_stop", []byte(`{"type":"message_stop"}`))
	return out, true
}
