package prompts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// version builds a compiled version with one user message per content.
func version(t testing.TB, model string, hp map[string]string, contents ...string) *Version {
	t.Helper()
	v := &Version{Number: 1, Model: model, Hyperparameters: map[string]json.RawMessage{}}
	for _, c := range contents {
		v.Messages = append(v.Messages, Message{Role: "user", Content: mustMarshal(c)})
	}
	for k, raw := range hp {
		v.Hyperparameters[k] = json.RawMessage(raw)
	}
	if err := v.validate(""); err != nil {
		t.Fatal(err)
	}
	return v
}

// renderOne renders a one-message template and returns its content.
func renderOne(t *testing.T, tmpl, vars string) (string, error) {
	t.Helper()
	v := version(t, "", nil, tmpl)
	out, err := RenderRequest(&Prompt{Slug: "p"}, v, []byte(`{"variables":`+vars+`}`))
	if err != nil {
		return "", err
	}
	var body struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal(out, &body); err != nil {
		t.Fatalf("invalid JSON %s: %v", out, err)
	}
	return body.Messages[0].Content, nil
}

func TestMustacheRendering(t *testing.T) {
	cases := []struct {
		name, tmpl, vars, want string
		missing                string // the variable a 400 must name
	}{
		{"plain", "Hello {{name}}!", `{"name":"Ada"}`, "Hello Ada!", ""},
		{"no html escaping", "{{x}} and {{{x}}}", `{"x":"<b>&\"'</b>"}`, `<b>&"'</b> and <b>&"'</b>`, ""},
		{"numbers as written", "{{n}} {{big}} {{f}}", `{"n":3,"big":12345678901234567890,"f":0.25}`, "3 12345678901234567890 0.25", ""},
		{"nested object", "{{user.name}} ({{user.address.city}})", `{"user":{"name":"Ada","address":{"city":"London"}}}`, "Ada (London)", ""},
		{"section over a list", "{{#items}}[{{name}}]{{/items}}", `{"items":[{"name":"a"},{"name":"b"}]}`, "[a][b]", ""},
		{"section reads the outer context", "{{#items}}{{name}}@{{shop}} {{/items}}", `{"shop":"S","items":[{"name":"a"}]}`, "a@S ", ""},
		{"section over an object", "{{#user}}{{name}}{{/user}}", `{"user":{"name":"Ada"}}`, "Ada", ""},
		{"true section", "{{#vip}}VIP{{/vip}}", `{"vip":true}`, "VIP", ""},
		{"missing section is false", "a{{#vip}}VIP {{unknown}}{{/vip}}b", `{}`, "ab", ""},
		{"empty list section", "a{{#items}}{{x}}{{/items}}b", `{"items":[]}`, "ab", ""},
		{"inverted section shown", "{{^items}}none{{/items}}", `{"items":[]}`, "none", ""},
		{"inverted section when missing", "{{^vip}}regular {{name}}{{/vip}}", `{"name":"Ada"}`, "regular Ada", ""},
		{"inverted section hidden", "{{^vip}}regular{{/vip}}", `{"vip":true}`, "", ""},
		{"dot in a list", "{{#tags}}{{.}},{{/tags}}", `{"tags":["a","b"]}`, "a,b,", ""},
		{"null renders empty", "[{{x}}]", `{"x":null}`, "[]", ""},
		{"extra variables ignored", "{{a}}", `{"a":"1","b":"2"}`, "1", ""},
		{"comment", "a{{! note }}b", `{}`, "ab", ""},
		{"custom delimiters", "{{=<% %>=}}<% x %>", `{"x":"y"}`, "y", ""},
		{"system prompt newlines", "line1\n{{x}}\n", `{"x":"tab\there"}`, "line1\ntab\there\n", ""},
		{"missing top-level", "Hello {{name}}", `{}`, "", "name"},
		{"missing nested", "{{user.name}}", `{"user":{}}`, "", "user.name"},
		{"nested through a string", "{{user.name}}", `{"user":"Ada"}`, "", "user.name"},
		{"missing inside a rendered section", "{{#items}}{{price}}{{/items}}", `{"items":[{"price":1},{}]}`, "", "price"},
		{"missing inside a shown inverted section", "{{^vip}}{{name}}{{/vip}}", `{}`, "", "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := renderOne(t, c.tmpl, c.vars)
			if c.missing != "" {
				var ae *apierror.Error
				if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "variables."+c.missing || !strings.Contains(ae.Message, c.missing) {
					t.Fatalf("want a 400 naming %q, got %v", c.missing, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestTemplateParseErrors(t *testing.T) {
	cases := []struct{ name, tmpl, want string }{
		{"unclosed section", "{{#a}}x", "invalid Mustache template"},
		{"mismatched close", "{{#a}}x{{/b}}", "invalid Mustache template"},
		{"partial", "{{> /etc/passwd}}", "partials are not supported"},
		{"partial in a section", "{{#a}}{{> x}}{{/a}}", "partials are not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &Version{Messages: []Message{{Role: "system", Content: mustMarshal(c.tmpl)}}}
			err := v.validate("")
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "messages[0].content" || !strings.Contains(fe.Message, c.want) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestContentParts(t *testing.T) {
	v := &Version{Messages: []Message{{Role: "user", Content: json.RawMessage(
		`[{"type":"text","text":"Describe {{thing}}","cache_control":{"type":"ephemeral"}},{"type":"image_url","image_url":{"url":"https://x/{{not_templated}}"}}]`)}}}
	if err := v.validate(""); err != nil {
		t.Fatal(err)
	}
	out, err := RenderRequest(&Prompt{}, v, []byte(`{"variables":{"thing":"<this>"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"user","content":[{"cache_control":{"type":"ephemeral"},"text":"Describe <this>","type":"text"},{"image_url":{"url":"https://x/{{not_templated}}"},"type":"image_url"}]}]}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

func TestOverridePrecedence(t *testing.T) {
	v := version(t, "gpt-saved", map[string]string{"temperature": "0.2", "max_tokens": "100", "tools": `[{"type":"function","function":{"name":"f"}}]`}, "hi {{x}}")
	cases := []struct {
		name, body, want string
	}{
		{"saved only", `{"variables":{"x":1}}`,
			`{"messages":[{"role":"user","content":"hi 1"}],"model":"gpt-saved","max_tokens":100,"temperature":0.2,"tools":[{"type":"function","function":{"name":"f"}}]}`},
		{"request wins", `{"variables":{"x":1},"temperature":0.9,"model":"gpt-req","stream":true}`,
			`{"messages":[{"role":"user","content":"hi 1"}],"model":"gpt-req","max_tokens":100,"stream":true,"temperature":0.9,"tools":[{"type":"function","function":{"name":"f"}}]}`},
		{"null keeps saved, new field added", `{"variables":{"x":1},"max_tokens":null,"top_p":0.5,"prompt_id":"p@1"}`,
			`{"messages":[{"role":"user","content":"hi 1"}],"model":"gpt-saved","max_tokens":100,"temperature":0.2,"tools":[{"type":"function","function":{"name":"f"}}],"top_p":0.5}`},
		{"override replaces a whole object", `{"variables":{"x":1},"tools":[]}`,
			`{"messages":[{"role":"user","content":"hi 1"}],"model":"gpt-saved","max_tokens":100,"temperature":0.2,"tools":[]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := RenderRequest(&Prompt{}, v, []byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Fatalf("got  %s\nwant %s", out, c.want)
			}
		})
	}
}

func TestRenderRequestErrors(t *testing.T) {
	v := version(t, "m", nil, "{{x}}")
	cases := []struct{ name, body, param string }{
		{"empty body", ``, "variables"},
		{"not an object", `[1]`, ""},
		{"no variables", `{"temperature":1}`, "variables"},
		{"variables null", `{"variables":null}`, "variables"},
		{"variables a string", `{"variables":"x"}`, "variables"},
		{"nested hyperparameters", `{"variables":{"x":1},"hyperparameters":{"temperature":1}}`, "hyperparameters"},
		{"messages", `{"variables":{"x":1},"messages":[]}`, "messages"},
		{"model not a string", `{"variables":{"x":1},"model":3}`, "model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := RenderRequest(&Prompt{}, v, []byte(c.body))
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != 400 || (c.param != "" && ae.Param != c.param) {
				t.Fatalf("want a 400 naming %q, got %#v", c.param, err)
			}
		})
	}
}
