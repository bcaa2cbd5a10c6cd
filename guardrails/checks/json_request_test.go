package checks

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

func TestJSONSchema(t *testing.T) {
	schema := `{"schema":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}`
	runCases(t, "jsonSchema", []checkCase{
		{name: "fenced valid", in: after("Sure:\n```json\n{\"name\":\"x\"}\n```"), params: schema, pass: true},
		{name: "unfenced flat valid", in: after(`result {"name":"x"} done`), params: schema, pass: true},
		{name: "invalid against schema", in: after(`{"name":1}`), params: schema, pass: false},
		{name: "not inverts invalid", in: after(`{"name":1}`), params: `{"not":true,` + schema[1:], pass: true},
		{name: "second candidate validates", in: after("```json\n{\"x\":1}\n```\n```json\n{\"name\":\"y\"}\n```"), params: schema, pass: true},
		{name: "unfenced nested JSON is truncated", in: after(`{"name":{"b":1}}`), params: `{"schema":{"type":"object"}}`, pass: false},
		{name: "no JSON", in: after("no json here"), params: schema, pass: false},
		{name: "missing schema", in: after(`{}`), params: `{}`, errSub: "missing or invalid JSON schema"},
		{name: "uncompilable schema", in: after(`{}`), params: `{"schema":{"type":"nonsense"}}`, errSub: "schema", prepare: true},
		{name: "external ref refused", in: after(`{}`), params: `{"schema":{"$ref":"file:///etc/passwd"}}`, errSub: "schema", prepare: true},
	})
	v, _ := run(t, "jsonSchema", after(`{"name":1}`), schema)
	errs := v.Data.(map[string]any)["validationErrors"].([]map[string]string)
	if len(errs) == 0 || errs[len(errs)-1]["path"] != "/name" {
		t.Fatalf("validationErrors %v", errs)
	}
	v, _ = run(t, "jsonSchema", after("nothing"), schema)
	if v.Data.(map[string]any)["explanation"] != "No valid JSON found in the response." {
		t.Fatalf("data %v", v.Data)
	}
}

func TestJSONKeys(t *testing.T) {
	two := `{"key1":"value1"} {"key2":"value2","key3":"value3"}`
	runCases(t, "jsonKeys", []checkCase{
		{name: "all in second object", in: after(two), params: `{"keys":["key2","key3"],"operator":"all"}`, pass: true},
		{name: "any", in: after(two), params: `{"keys":["key3","nope"],"operator":"any"}`, pass: true},
		{name: "all missing", in: after(two), params: `{"keys":["key1","key2"],"operator":"all"}`, pass: false},
		{name: "none", in: after(two), params: `{"keys":["nope"],"operator":"none"}`, pass: true},
		{name: "fenced", in: after("```json\n{\"a\":1}\n```"), params: `{"keys":["a"],"operator":"all"}`, pass: true},
		{name: "no JSON fails without error", in: after("text"), params: `{"keys":["a"],"operator":"any"}`, pass: false},
		{name: "empty text", in: after(""), params: `{"keys":["a"],"operator":"any"}`, errSub: "missing text"},
		{name: "empty keys", in: after(two), params: `{"keys":[],"operator":"any"}`, errSub: "keys"},
		{name: "missing operator", in: after(two), params: `{"keys":["a"]}`, errSub: "operator"},
	})
}

func TestModelWhitelist(t *testing.T) {
	noModel := &guardrails.Input{Stage: guardrails.BeforeRequest, RequestType: "chatComplete", Request: []byte(`{"messages":[]}`)}
	runCases(t, "modelWhitelist", []checkCase{
		{name: "allowed", in: before("x"), params: `{"models":["gpt-4o","o1"]}`, pass: true},
		{name: "not allowed", in: before("x"), params: `{"models":["o1"]}`, pass: false},
		{name: "not inverts", in: before("x"), params: `{"models":["o1"],"not":true}`, pass: true},
		{name: "missing list", in: before("x"), params: `{}`, errSub: "model list"},
		{name: "missing model", in: noModel, params: `{"models":["o1"]}`, errSub: "missing model"},
	})
}

func TestModelRules(t *testing.T) {
	rules := `{"rules":{"defaults":["gpt-3.5"],"metadata":{"tier":{"pro":["gpt-4o"],"free":["gpt-3.5"]},"team":{"ml":["o1"]}}}}`
	with := func(md map[string]string) *guardrails.Input {
		in := before("x")
		in.Metadata = md
		return in
	}
	runCases(t, "modelRules", []checkCase{
		{name: "metadata value allows", in: with(map[string]string{"tier": "pro"}), params: rules, pass: true},
		{name: "metadata value does not allow", in: with(map[string]string{"tier": "free"}), params: rules, pass: false},
		{name: "array metadata value", in: with(map[string]string{"tier": `["free","pro"]`}), params: rules, pass: true},
		{name: "no match uses defaults", in: with(nil), params: rules, pass: false},
		{name: "defaults allow", in: with(nil), params: `{"rules":{"defaults":["gpt-4o"]}}`, pass: true},
		{name: "not inverts", in: with(map[string]string{"tier": "pro"}), params: `{"not":true,` + rules[1:], pass: false},
		{name: "nothing resolved", in: with(nil), params: `{"rules":{"metadata":{}}}`, errSub: "no allowed models"},
		{name: "missing rules", in: with(nil), params: `{}`, errSub: "missing rules"},
	})
}

func TestRequiredMetadataKeys(t *testing.T) {
	md := before("x")
	md.Metadata = map[string]string{"team": "a", "env": "prod"}
	afterIn := after("x")
	runCases(t, "requiredMetadataKeys", []checkCase{
		{name: "all present", in: md, params: `{"metadataKeys":["team","env"],"operator":"all"}`, pass: true},
		{name: "all missing one", in: md, params: `{"metadataKeys":["team","user"],"operator":"all"}`, pass: false},
		{name: "any", in: md, params: `{"metadataKeys":["user","env"],"operator":"any"}`, pass: true},
		{name: "none", in: md, params: `{"metadataKeys":["user"],"operator":"none"}`, pass: true},
		{name: "none but present", in: md, params: `{"metadataKeys":["team"],"operator":"none"}`, pass: false},
		{name: "bad params pass with error", in: md, params: `{"metadataKeys":[],"operator":"all"}`, pass: true, errSub: "metadataKeys"},
		{name: "missing operator passes with error", in: md, params: `{"metadataKeys":["team"]}`, pass: true, errSub: "operator"},
		{name: "after request passes with error", in: afterIn, params: `{"metadataKeys":["team"],"operator":"all"}`, pass: true, errSub: "before the request"},
	})
}

func TestAllowedRequestTypes(t *testing.T) {
	typed := func(typ string, md map[string]string) *guardrails.Input {
		in := before("x")
		in.RequestType, in.Metadata = typ, md
		return in
	}
	runCases(t, "allowedRequestTypes", []checkCase{
		{name: "no lists allows", in: typed("chatComplete", nil), params: `{}`, pass: true},
		{name: "allowed", in: typed("chatComplete", nil), params: `{"allowedTypes":["chatComplete","embed"]}`, pass: true},
		{name: "not allowed", in: typed("complete", nil), params: `{"allowedTypes":["chatComplete"]}`, pass: false},
		{name: "stream type literal", in: typed("stream-chatComplete", nil), params: `{"allowedTypes":["chatComplete"]}`, pass: false},
		{name: "blocked only", in: typed("embed", nil), params: `{"blockedTypes":"embed, complete"}`, pass: false},
		{name: "blocked only other", in: typed("chatComplete", nil), params: `{"blockedTypes":["embed"]}`, pass: true},
		{name: "both lists", in: typed("complete", nil), params: `{"allowedTypes":["chatComplete"],"blockedTypes":["embed"]}`, pass: false},
		{name: "overlap", in: typed("embed", nil), params: `{"allowedTypes":["embed"],"blockedTypes":["embed"]}`, errSub: "both allowed and blocked"},
		{name: "metadata fallback", in: typed("embed", map[string]string{"supported_endpoints": "chatComplete,complete"}), params: `{}`, pass: false},
		{name: "metadata blocked", in: typed("embed", map[string]string{"blocked_endpoints": `["embed"]`}), params: `{}`, pass: false},
		{name: "missing type", in: typed("", nil), params: `{}`, errSub: "missing request type"},
	})
}

func TestAddPrefix(t *testing.T) {
	in := func(body, typ string) *guardrails.Input {
		return &guardrails.Input{Stage: guardrails.BeforeRequest, RequestType: typ, Request: []byte(body)}
	}
	tests := []struct {
		name, body, typ, params, path, want string
		transformed                         bool
	}{
		{"string content", `{"messages":[{"role":"user","content":"hi"}]}`, "chatComplete", `{"prefix":"P: "}`,
			"messages.0.content", "P: hi", true},
		{"first user message only", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, "chatComplete", `{"prefix":"P "}`,
			"messages.@this", `[{"role":"user","content":"P a"},{"role":"user","content":"b"}]`, true},
		{"first text part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"hi"}]}]}`, "chatComplete", `{"prefix":"P "}`,
			"messages.0.content.1.text", "P hi", true},
		{"no text part prepends one", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, "chatComplete", `{"prefix":"P"}`,
			"messages.0.content.0", `{"type":"text","text":"P"}`, true},
		{"missing role appended", `{"messages":[{"role":"system","content":"s"}]}`, "chatComplete", `{"prefix":"P"}`,
			"messages.1", `{"role":"user","content":"P"}`, true},
		{"missing system unshifted", `{"messages":[{"role":"user","content":"u"}]}`, "chatComplete", `{"prefix":"S","applyToRole":"system"}`,
			"messages.0", `{"role":"system","content":"S"}`, true},
		{"addToExisting false inserts", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`, "chatComplete", `{"prefix":"P","addToExisting":false}`,
			"messages.1", `{"role":"user","content":"P"}`, true},
		{"onlyIfEmpty skips content", `{"messages":[{"role":"user","content":"u"}]}`, "chatComplete", `{"prefix":"P","onlyIfEmpty":true}`,
			"messages.0.content", "u", false},
		{"onlyIfEmpty fills empty", `{"messages":[{"role":"user","content":""}]}`, "chatComplete", `{"prefix":"P","onlyIfEmpty":true}`,
			"messages.0.content", "P", true},
		{"completion prompt", `{"prompt":"tell me"}`, "complete", `{"prefix":"P: "}`, "prompt", "P: tell me", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := run(t, "addPrefix", in(tc.body, tc.typ), tc.params)
			if err != nil || !v.Pass || v.Transformed != tc.transformed {
				t.Fatalf("verdict %+v err %v", v, err)
			}
			body := []byte(tc.body)
			if v.Transformed {
				body = v.Body
			}
			got := gjson.GetBytes(body, tc.path)
			if got.Type == gjson.String {
				if got.Str != tc.want {
					t.Fatalf("%s = %q, want %q (body %s)", tc.path, got.Str, tc.want, body)
				}
			} else if got.Raw != tc.want {
				t.Fatalf("%s = %s, want %s", tc.path, got.Raw, tc.want)
			}
		})
	}
	v, err := run(t, "addPrefix", in(`{"input":"x"}`, "embed"), `{"prefix":"P"}`)
	if err == nil || !v.Pass || v.Transformed {
		t.Fatalf("embed: verdict %+v err %v, want passing error", v, err)
	}
}

func TestRegexReplace(t *testing.T) {
	tests := []struct {
		name, text, params, want string
		pass, transformed        bool
	}{
		{"global", "a1 b2 c3", `{"rule":"/\\d/g"}`, "a[REDACTED] b[REDACTED] c[REDACTED]", true, true},
		{"first only without g", "a1 b2", `{"rule":"\\d","redactText":"#"}`, "a# b2", true, true},
		{"case-insensitive flag", "Secret secret", `{"rule":"/SECRET/gi","redactText":"*"}`, "* *", true, true},
		{"failOnDetection", "card 4111", `{"rule":"/\\d{4}/g","failOnDetection":true}`, "card [REDACTED]", false, true},
		{"no match", "clean", `{"rule":"/\\d/g","failOnDetection":true}`, "clean", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := run(t, "regexReplace", before(tc.text), tc.params)
			if err != nil || v.Pass != tc.pass || v.Transformed != tc.transformed {
				t.Fatalf("verdict %+v err %v", v, err)
			}
			body := chatReq(tc.text)
			if v.Transformed {
				body = v.Body
			}
			if got := gjson.GetBytes(body, "messages.1.content").Str; got != tc.want {
				t.Fatalf("content %q, want %q", got, tc.want)
			}
			if gjson.GetBytes(body, "messages.0.content").Str != "sys" {
				t.Fatal("only the last message is rewritten")
			}
		})
	}
	if _, err := run(t, "regexReplace", before("x"), `{"rule":"/(?<=a)b/g"}`); err == nil {
		t.Fatal("a lookbehind must be rejected at prepare time")
	}
	v, err := run(t, "regexReplace", after("my 123"), `{"rule":"/\\d+/g"}`)
	if err != nil || !v.Transformed || gjson.GetBytes(v.Body, "choices.0.message.content").Str != "my [REDACTED]" {
		t.Fatalf("after: %+v %v", v, err)
	}
}
