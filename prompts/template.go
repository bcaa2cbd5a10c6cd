package prompts

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cbroglie/mustache"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// compiledMessage is a template message parsed once, when its version is
// loaded, so rendering never parses.
type compiledMessage struct {
	role, name string
	// text is the template of a string content; tags are its tags,
	// extracted once (the library builds them anew on every call).
	text *mustache.Template
	tags []mustache.Tag
	// parts holds an array content; nil for a string content.
	parts []compiledPart
}

// compiledPart is one element of an array content: a text part whose text
// is a template, or any other part kept verbatim.
type compiledPart struct {
	fields map[string]json.RawMessage // the part without "text", for text parts
	text   *mustache.Template         // nil for verbatim parts
	tags   []mustache.Tag
	raw    json.RawMessage // verbatim parts
}

// noPartials refuses every partial. The library's default provider reads
// partials from files in the working directory, which would let whoever
// can create a prompt read the server's files ({{> /etc/passwd}}); partial
// tags are also rejected when a template is parsed.
type noPartials struct{}

func (noPartials) Get(name string) (string, error) {
	return "", fmt.Errorf("partials are not supported ({{> %s}})", name)
}

// parseTemplate compiles one content template. Every variable is raw (no
// HTML escaping): prompts are text sent to a model, not HTML, and
// "<b>&" must reach the model as written. Partials are refused.
func parseTemplate(src, field string) (*mustache.Template, error) {
	t, err := mustache.ParseStringPartialsRaw(src, noPartials{}, true)
	if err != nil {
		return nil, fieldErr(field, "invalid Mustache template: %v", err)
	}
	if name, ok := findPartial(t.Tags()); ok {
		return nil, fieldErr(field, "partials are not supported ({{> %s}}); Mustache here is variables and sections only", name)
	}
	return t, nil
}

func findPartial(tags []mustache.Tag) (string, bool) {
	for _, t := range tags {
		switch t.Type() {
		case mustache.Partial:
			return t.Name(), true
		case mustache.Section, mustache.InvertedSection:
			if n, ok := findPartial(t.Tags()); ok {
				return n, true
			}
		}
	}
	return "", false
}

func compileMessages(msgs []Message, prefix string) ([]compiledMessage, error) {
	out := make([]compiledMessage, len(msgs))
	for i, m := range msgs {
		field := fmt.Sprintf("%smessages[%d].content", prefix, i)
		cm := compiledMessage{role: m.Role, name: m.Name}
		var s string
		if err := json.Unmarshal(m.Content, &s); err == nil {
			t, err := parseTemplate(s, field)
			if err != nil {
				return nil, err
			}
			cm.text, cm.tags = t, t.Tags()
			out[i] = cm
			continue
		}
		var parts []map[string]json.RawMessage
		if err := json.Unmarshal(m.Content, &parts); err != nil || parts == nil {
			return nil, fieldErr(field, "must be a string or an array of content parts")
		}
		cm.parts = make([]compiledPart, len(parts))
		for j, part := range parts {
			pf := fmt.Sprintf("%s[%d]", field, j)
			var typ string
			_ = json.Unmarshal(part["type"], &typ)
			if typ != "text" {
				cm.parts[j] = compiledPart{raw: mustMarshal(part)}
				continue
			}
			var text string
			if err := json.Unmarshal(part["text"], &text); err != nil {
				return nil, fieldErr(pf+".text", "must be a string")
			}
			t, err := parseTemplate(text, pf+".text")
			if err != nil {
				return nil, err
			}
			rest := make(map[string]json.RawMessage, len(part))
			for k, v := range part {
				if k != "text" {
					rest[k] = v
				}
			}
			cm.parts[j] = compiledPart{fields: rest, text: t, tags: t.Tags()}
		}
		out[i] = cm
	}
	return out, nil
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// errMissing is returned by checkVariables; the name is the variable as
// written in the template.
type missingVariableError struct{ name string }

func (e *missingVariableError) Error() string { return fmt.Sprintf("missing variable %q", e.name) }

// checkVariables reports the first variable a render would need but the
// variables do not give. It walks the tags the way the renderer resolves
// them, so it is exact rather than conservative:
//
//   - A variable outside any section must be given; dotted names
//     ({{user.name}}) must resolve all the way down.
//   - A section ({{#x}}) or inverted section ({{^x}}) may always be
//     missing: a missing value is false, which is what optional blocks are
//     for. Only the branch that will render is checked.
//   - Inside a rendered section, a variable resolves against the section's
//     item first and then the enclosing contexts, as Mustache does; it
//     must resolve in one of them, for every item of a list.
//
// A null value counts as given (it renders as empty).
func checkVariables(tags []mustache.Tag, chain []any) error {
	for _, t := range tags {
		switch t.Type() {
		case mustache.Variable:
			if _, ok := resolve(chain, t.Name()); !ok {
				return &missingVariableError{name: t.Name()}
			}
		case mustache.Section:
			v, _ := resolve(chain, t.Name())
			if falsy(v) {
				continue
			}
			if list, ok := v.([]any); ok {
				for _, item := range list {
					if err := checkVariables(t.Tags(), push(chain, item)); err != nil {
						return err
					}
				}
				continue
			}
			if err := checkVariables(t.Tags(), push(chain, v)); err != nil {
				return err
			}
		case mustache.InvertedSection:
			if v, _ := resolve(chain, t.Name()); falsy(v) {
				if err := checkVariables(t.Tags(), chain); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func push(chain []any, v any) []any {
	out := make([]any, 0, len(chain)+1)
	out = append(out, v)
	return append(out, chain...)
}

// resolve looks a name up like the renderer: the first segment through
// the context chain (innermost first), the rest inside what it found.
func resolve(chain []any, name string) (any, bool) {
	if name == "." {
		if len(chain) == 0 {
			return nil, false
		}
		return chain[0], true
	}
	first, rest, dotted := strings.Cut(name, ".")
	var v any
	found := false
	for _, ctx := range chain {
		if m, ok := ctx.(map[string]any); ok {
			if v, found = m[first]; found {
				break
			}
		}
	}
	if !found {
		return nil, false
	}
	if !dotted {
		return v, true
	}
	return resolve([]any{v}, rest)
}

// falsy mirrors the renderer's notion of an empty section value.
func falsy(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		return len(x) == 0
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	}
	return false
}

// nullsToEmpty replaces JSON nulls inside objects and arrays with "",
// which the renderer would otherwise print as "<nil>".
func nullsToEmpty(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				x[k] = ""
			} else {
				nullsToEmpty(e)
			}
		}
	case []any:
		for i, e := range x {
			if e == nil {
				x[i] = ""
			} else {
				nullsToEmpty(e)
			}
		}
	}
}

// renderMessages renders every message into buf as a JSON array.
func renderMessages(buf []byte, msgs []compiledMessage, vars map[string]any) ([]byte, error) {
	var sb strings.Builder
	buf = append(buf, '[')
	for i, m := range msgs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"role":`...)
		buf = oaiwire.AppendString(buf, m.role)
		if m.name != "" {
			buf = append(buf, `,"name":`...)
			buf = oaiwire.AppendString(buf, m.name)
		}
		buf = append(buf, `,"content":`...)
		if m.parts == nil {
			sb.Reset()
			if err := m.text.FRender(&sb, vars); err != nil {
				return nil, err
			}
			buf = oaiwire.AppendString(buf, sb.String())
			buf = append(buf, '}')
			continue
		}
		buf = append(buf, '[')
		for j, p := range m.parts {
			if j > 0 {
				buf = append(buf, ',')
			}
			if p.text == nil {
				buf = append(buf, p.raw...)
				continue
			}
			sb.Reset()
			if err := p.text.FRender(&sb, vars); err != nil {
				return nil, err
			}
			buf = appendObjectWith(buf, p.fields, "text", sb.String())
		}
		buf = append(buf, "]}"...)
	}
	return append(buf, ']'), nil
}

// appendObjectWith writes fields plus key:value (a string) as one JSON
// object with sorted keys.
func appendObjectWith(buf []byte, fields map[string]json.RawMessage, key, value string) []byte {
	keys := make([]string, 0, len(fields)+1)
	for k := range fields {
		keys = append(keys, k)
	}
	keys = append(keys, key)
	sort.Strings(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = oaiwire.AppendString(buf, k)
		buf = append(buf, ':')
		if k == key {
			buf = oaiwire.AppendString(buf, value)
		} else {
			buf = append(buf, fields[k]...)
		}
	}
	return append(buf, '}')
}
