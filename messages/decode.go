package messages

import (
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// decode reads a Messages request, already checked to be a bounded JSON
// object, in one walk with gjson: it runs for every Messages call, native
// ones included, where encoding/json's reflection (and its re-validation
// of every nested value) cost a noticeable share of the request. A member
// of the wrong JSON type is a 400 naming it; null is an absent member, as
// encoding/json has it.
func decode(body []byte) (*Request, error) {
	d := decoder{}
	gjson.ParseBytes(body).ForEach(d.member)
	if d.err != nil {
		return nil, d.err
	}
	return &d.r, nil
}

type decoder struct {
	r   Request
	err error
}

// typeErr is the 400 of a member of the wrong JSON type.
func typeErr(field, want string) *apierror.Error {
	return invalid(field, "Input should be a valid %s", want)
}

func (d *decoder) member(k, v gjson.Result) bool {
	if v.Type == gjson.Null {
		return true
	}
	r := &d.r
	switch k.Str {
	case "model":
		r.Model, d.err = str(v, "model")
	case "max_tokens":
		r.MaxTokens, d.err = intp(v, "max_tokens")
	case "system":
		r.System, d.err = contentp(v, "system")
	case "messages":
		if !v.IsArray() {
			d.err = typeErr("messages", "list")
			break
		}
		v.ForEach(func(_, m gjson.Result) bool {
			var msg Message
			msg, d.err = message(m, "messages."+strconv.Itoa(len(r.Messages)))
			r.Messages = append(r.Messages, msg)
			return d.err == nil && len(r.Messages) <= MaxMessages
		})
	case "tools":
		if !v.IsArray() {
			d.err = typeErr("tools", "list")
			break
		}
		v.ForEach(func(_, t gjson.Result) bool {
			var tl Tool
			tl, d.err = tool(t, "tools."+strconv.Itoa(len(r.Tools)))
			r.Tools = append(r.Tools, tl)
			return d.err == nil && len(r.Tools) <= MaxTools
		})
	case "tool_choice":
		if !v.IsObject() {
			d.err = typeErr("tool_choice", "dictionary")
			break
		}
		c := &ToolChoice{}
		if c.Type, d.err = str(v.Get("type"), "tool_choice.type"); d.err == nil {
			if c.Name, d.err = str(v.Get("name"), "tool_choice.name"); d.err == nil {
				c.DisableParallelToolUse, d.err = boolv(v.Get("disable_parallel_tool_use"), "tool_choice.disable_parallel_tool_use")
			}
		}
		r.ToolChoice = c
	case "stop_sequences":
		if !v.IsArray() {
			d.err = typeErr("stop_sequences", "list")
			break
		}
		v.ForEach(func(_, s gjson.Result) bool {
			if s.Type != gjson.String {
				d.err = typeErr("stop_sequences."+strconv.Itoa(len(r.StopSequences)), "string")
				return false
			}
			r.StopSequences = append(r.StopSequences, s.Str)
			return len(r.StopSequences) <= MaxStopSequences
		})
	case "temperature":
		r.Temperature, d.err = floatp(v, "temperature")
	case "top_p":
		r.TopP, d.err = floatp(v, "top_p")
	case "top_k":
		r.TopK, d.err = intp(v, "top_k")
	case "stream":
		r.Stream, d.err = boolv(v, "stream")
	case "metadata":
		if !v.IsObject() {
			d.err = typeErr("metadata", "dictionary")
			break
		}
		r.Metadata = &Metadata{}
		r.Metadata.UserID, d.err = str(v.Get("user_id"), "metadata.user_id")
	case "thinking":
		if !v.IsObject() {
			d.err = typeErr("thinking", "dictionary")
			break
		}
		r.Thinking = &Thinking{}
		if r.Thinking.Type, d.err = str(v.Get("type"), "thinking.type"); d.err == nil {
			r.Thinking.BudgetTokens, d.err = intp(v.Get("budget_tokens"), "thinking.budget_tokens")
		}
	case "service_tier":
		r.ServiceTier, d.err = str(v, "service_tier")
	case "mcp_servers":
		r.MCPServers = json.RawMessage(v.Raw)
	case "container":
		r.Container = json.RawMessage(v.Raw)
	}
	return d.err == nil
}

// str reads an optional string member.
func str(v gjson.Result, field string) (string, error) {
	switch v.Type {
	case gjson.Null:
		return "", nil
	case gjson.String:
		return v.Str, nil
	}
	return "", typeErr(field, "string")
}

// intp reads an optional integer member.
func intp(v gjson.Result, field string) (*int64, error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if v.Type != gjson.Number {
		return nil, typeErr(field, "integer")
	}
	n, err := strconv.ParseInt(v.Raw, 10, 64)
	if err != nil {
		return nil, typeErr(field, "integer")
	}
	return &n, nil
}

// floatp reads an optional number member.
func floatp(v gjson.Result, field string) (*float64, error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if v.Type != gjson.Number {
		return nil, typeErr(field, "number")
	}
	f := v.Num
	return &f, nil
}

// boolv reads an optional boolean member.
func boolv(v gjson.Result, field string) (bool, error) {
	switch v.Type {
	case gjson.Null:
		return false, nil
	case gjson.True:
		return true, nil
	case gjson.False:
		return false, nil
	}
	return false, typeErr(field, "boolean")
}

// contentp reads an optional string-or-blocks member.
func contentp(v gjson.Result, field string) (*Content, error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	c, err := content(v, field)
	return &c, err
}

// content reads a string or an array of content blocks.
func content(v gjson.Result, field string) (Content, error) {
	var c Content
	switch {
	case v.Type == gjson.Null:
		return c, nil
	case v.Type == gjson.String:
		c.Text, c.set = v.Str, true
		return c, nil
	case !v.IsArray():
		return c, invalid(field, "content must be a string or an array of content blocks")
	}
	c.set, c.IsBlocks = true, true
	var err error
	v.ForEach(func(_, b gjson.Result) bool {
		var blk Block
		blk, err = block(b, field+"."+strconv.Itoa(len(c.Blocks)))
		c.Blocks = append(c.Blocks, blk)
		return err == nil && len(c.Blocks) <= MaxBlocks
	})
	return c, err
}

// message reads one turn.
func message(v gjson.Result, field string) (Message, error) {
	var m Message
	if !v.IsObject() {
		return m, typeErr(field, "dictionary")
	}
	var err error
	v.ForEach(func(k, x gjson.Result) bool {
		switch k.Str {
		case "role":
			m.Role, err = str(x, field+".role")
		case "content":
			m.Content, err = content(x, field+".content")
		}
		return err == nil
	})
	return m, err
}

// block reads one content block.
func block(v gjson.Result, field string) (Block, error) {
	var b Block
	if !v.IsObject() {
		return b, typeErr(field, "dictionary")
	}
	var err error
	v.ForEach(func(k, x gjson.Result) bool {
		if x.Type == gjson.Null {
			return true
		}
		switch k.Str {
		case "type":
			b.Type, err = str(x, field+".type")
		case "text":
			b.Text, err = str(x, field+".text")
		case "source":
			if !x.IsObject() {
				err = typeErr(field+".source", "dictionary")
				break
			}
			s := &Source{}
			s.Type, err = str(x.Get("type"), field+".source.type")
			if err == nil {
				s.MediaType, err = str(x.Get("media_type"), field+".source.media_type")
			}
			if err == nil {
				s.URL, err = str(x.Get("url"), field+".source.url")
			}
			if err == nil {
				// A content source's data is blocks; only a string is
				// data the translation sends.
				if d := x.Get("data"); d.Type == gjson.String {
					s.Data = d.Str
				}
			}
			b.Source = s
		case "id":
			b.ID, err = str(x, field+".id")
		case "name":
			b.Name, err = str(x, field+".name")
		case "input":
			b.Input = json.RawMessage(x.Raw)
		case "tool_use_id":
			b.ToolUseID, err = str(x, field+".tool_use_id")
		case "content":
			var c Content
			c, err = content(x, field+".content")
			b.Content = &c
		case "is_error":
			b.IsError, err = boolv(x, field+".is_error")
		case "thinking":
			b.Thinking, err = str(x, field+".thinking")
		case "signature":
			b.Signature, err = str(x, field+".signature")
		case "data":
			b.Data, err = str(x, field+".data")
		case "title":
			b.Title, err = str(x, field+".title")
		}
		return err == nil
	})
	return b, err
}

// tool reads one tool definition.
func tool(v gjson.Result, field string) (Tool, error) {
	var t Tool
	if !v.IsObject() {
		return t, typeErr(field, "dictionary")
	}
	var err error
	v.ForEach(func(k, x gjson.Result) bool {
		switch k.Str {
		case "type":
			t.Type, err = str(x, field+".type")
		case "name":
			t.Name, err = str(x, field+".name")
		case "description":
			t.Description, err = str(x, field+".description")
		case "input_schema":
			if x.Type != gjson.Null {
				t.InputSchema = json.RawMessage(x.Raw)
			}
		}
		return err == nil
	})
	return t, err
}
