package checks

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// AddPrefix (llm.checks.addPrefix) is a mutator: it adds "prefix" to the
// first message with role "applyToRole" (default "user") of a chat or
// messages request, or to the prompt of a completion. With "addToExisting"
// (default true) the prefix goes into that message's text (its first text
// part, or a new first text part); otherwise a new message with the prefix
// is inserted before it. A missing role gets a new message (a system
// message first, others last). "onlyIfEmpty" adds nothing to a message
// that has content. It always passes.
type AddPrefix struct{}

// CaddyModule implements caddy.Module.
func (AddPrefix) CaddyModule() caddy.ModuleInfo {
	return info("addPrefix", func() caddy.Module { return new(AddPrefix) })
}

// Check implements guardrails.Check.
func (AddPrefix) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	pass := guardrails.Verdict{Pass: true}
	prefix := gjson.GetBytes(params, "prefix")
	if prefix.Type != gjson.String {
		return pass, errors.New("prefix: must be a string")
	}
	if in.Stage != guardrails.BeforeRequest {
		return pass, errors.New("addPrefix only runs before the request")
	}
	role := "user"
	if r := gjson.GetBytes(params, "applyToRole"); r.Type == gjson.String && r.Str != "" {
		role = r.Str
	}
	addToExisting := boolDefault(params, "addToExisting", true)
	onlyIfEmpty := truthy(params, "onlyIfEmpty")
	body := in.Request
	var out []byte
	var err error
	switch in.BodyType() {
	case "complete":
		out, err = prefixPrompt(body, prefix.Str)
	case "chatComplete", "messages":
		out, err = prefixMessages(body, prefix.Str, role, addToExisting, onlyIfEmpty)
	default:
		return pass, errors.New("addPrefix applies to chat, completions and messages requests only")
	}
	if err != nil {
		return pass, err
	}
	if out != nil {
		pass.Transformed, pass.Body = true, out
	}
	pass.Data = map[string]any{"prefix": prefix.Str, "applyToRole": role, "transformed": out != nil}
	return pass, nil
}

func prefixPrompt(body []byte, prefix string) ([]byte, error) {
	p := gjson.GetBytes(body, "prompt")
	switch {
	case p.Type == gjson.String:
		return sjson.SetBytes(body, "prompt", prefix+p.Str)
	case p.IsArray() && p.Get("0").Type == gjson.String:
		return sjson.SetBytes(body, "prompt.0", prefix+p.Get("0").Str)
	}
	return nil, nil
}

func prefixMessages(body []byte, prefix, role string, addToExisting, onlyIfEmpty bool) ([]byte, error) {
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return nil, errors.New("request has no messages")
	}
	items := msgs.Array()
	target := -1
	for i, m := range items {
		if m.Get("role").Str == role {
			target = i
			break
		}
	}
	newMsg := func() json.RawMessage {
		return mustJSON(textMessage{Role: role, Content: prefix})
	}
	raws := make([]json.RawMessage, len(items))
	for i, m := range items {
		raws[i] = json.RawMessage(m.Raw)
	}
	if target < 0 {
		if role == "system" {
			raws = append([]json.RawMessage{newMsg()}, raws...)
		} else {
			raws = append(raws, newMsg())
		}
		return setMessages(body, raws)
	}
	content := items[target].Get("content")
	if onlyIfEmpty && !contentEmpty(content) {
		return nil, nil
	}
	if !addToExisting {
		raws = append(raws[:target], append([]json.RawMessage{newMsg()}, raws[target:]...)...)
		return setMessages(body, raws)
	}
	msg := []byte(items[target].Raw)
	var err error
	switch {
	case content.Type == gjson.String:
		msg, err = sjson.SetBytes(msg, "content", prefix+content.Str)
	case content.IsArray():
		idx := -1
		content.ForEach(func(k, part gjson.Result) bool {
			if part.Get("type").Str == "text" {
				idx = int(k.Int())
				return false
			}
			return true
		})
		if idx >= 0 {
			i := strconv.Itoa(idx)
			msg, err = sjson.SetBytes(msg, "content."+i+".text", prefix+content.Get(i+".text").Str)
		} else {
			parts := []json.RawMessage{mustJSON(textPart{Type: "text", Text: prefix})}
			content.ForEach(func(_, part gjson.Result) bool {
				parts = append(parts, json.RawMessage(part.Raw))
				return true
			})
			msg, err = sjson.SetRawBytes(msg, "content", mustJSON(parts))
		}
	default:
		msg, err = sjson.SetBytes(msg, "content", prefix)
	}
	if err != nil {
		return nil, err
	}
	raws[target] = msg
	return setMessages(body, raws)
}

func contentEmpty(c gjson.Result) bool {
	switch {
	case !c.Exists() || c.Type == gjson.Null:
		return true
	case c.Type == gjson.String:
		return c.Str == ""
	case c.IsArray():
		empty := true
		c.ForEach(func(_, p gjson.Result) bool {
			if p.Get("text").Str != "" || p.Get("type").Str != "text" {
				empty = false
				return false
			}
			return true
		})
		return empty
	}
	return false
}

func setMessages(body []byte, raws []json.RawMessage) ([]byte, error) {
	return sjson.SetRawBytes(body, "messages", mustJSON(raws))
}

// textMessage and textPart keep the reference's key order.
type textMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
