package bedrock

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// A count_tokens call to a Claude model goes to CountTokens with the
// InvokeModel body it would have had (Bedrock's anthropic_version, no
// model or stream, a max_tokens when the client sent none), base64 in
// input.invokeModel.body, signed; an inference profile id is counted as
// its foundation model.
func TestPrepareCountTokens(t *testing.T) {
	cases := []struct {
		model, path string
		maxTokens   int64
		body        string
	}{
		{"anthropic.claude-sonnet-4-5-20250929-v1:0", "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens", 1,
			`{"model":"x","system":"Be terse.","messages":[{"role":"user","content":"hi"}]}`},
		{"us.anthropic.claude-3-7-sonnet-20250219-v1:0", "/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/count-tokens", 9,
			`{"model":"x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"global.anthropic.claude-haiku-4-5-20251001-v1:0", "/model/anthropic.claude-haiku-4-5-20251001-v1%3A0/count-tokens", 1,
			`{"messages":[{"role":"user","content":"hi"}]}`},
		{"arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku", "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A%3Afoundation-model%2Fanthropic.claude-3-haiku/count-tokens", 1,
			`{"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tc := range cases {
		c := &providers.Call{Op: providers.OpCountTokens, Method: http.MethodPost, Path: "/messages/count_tokens", Body: []byte(tc.body), Stream: true,
			Model: tc.model, Header: http.Header{"Anthropic-Beta": {"token-efficient-tools-2025-02-19"}}}
		u := providers.Upstream{Header: http.Header{}}
		s := keys()
		if err := testProvider().Prepare(c, &s, &u); err != nil {
			t.Fatal(err)
		}
		if u.URL.EscapedPath() != tc.path || u.Method != http.MethodPost || c.Stream || u.Header.Get("Accept") != "application/json" ||
			!strings.HasPrefix(u.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
			t.Fatalf("%s: %s %s %v", tc.model, u.Method, u.URL.EscapedPath(), u.Header)
		}
		enc := gjson.GetBytes(u.Body, "input.invokeModel.body")
		inner, err := base64.StdEncoding.DecodeString(enc.Str)
		if err != nil || !gjson.ValidBytes(u.Body) || len(gjson.ParseBytes(u.Body).Map()) != 1 {
			t.Fatalf("%s: body %s", tc.model, u.Body)
		}
		b := gjson.ParseBytes(inner)
		if b.Get("model").Exists() || b.Get("stream").Exists() || b.Get("anthropic_version").Str != messagesVersion ||
			b.Get("max_tokens").Int() != tc.maxTokens || b.Get("messages.0.content").Str != "hi" || b.Get("anthropic_beta.0").Str != "token-efficient-tools-2025-02-19" {
			t.Fatalf("%s: invoke body %s", tc.model, inner)
		}
	}
	p := testProvider()
	if !p.SpeaksMessages(providers.OpCountTokens, "anthropic.claude-3-haiku") || p.SpeaksMessages(providers.OpCountTokens, "amazon.nova-pro-v1:0") {
		t.Fatal("SpeaksMessages for count_tokens")
	}
	s := keys()
	c := &providers.Call{Op: providers.OpCountTokens, Body: []byte(`{"messages":[]}`), Model: "amazon.nova-pro-v1:0", Header: http.Header{}}
	if err := p.Prepare(c, &s, &providers.Upstream{Header: http.Header{}}); err == nil {
		t.Fatal("count_tokens for a non-Claude model was sent")
	}
}

// CountTokens' {"inputTokens":N} becomes Anthropic's {"input_tokens":N};
// anything else is not an answer; AWS errors take Anthropic's shape.
func TestCountTokensAnswer(t *testing.T) {
	tr := testProvider().Translator(providers.OpCountTokens)
	cases := []struct{ in, want string }{
		{`{"inputTokens":123}`, `{"input_tokens":123}`},
		{`{ "inputTokens" : 0 }`, `{"input_tokens":0}`},
		{`{"inputTokens":"7"}`, ""},
		{`{"input_tokens":7}`, ""},
		{`[1]`, ""},
		{`{"inputTokens":1`, ""},
	}
	for _, tc := range cases {
		out, u, err := tr.Response(&providers.Call{}, []byte(tc.in))
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: accepted as %s", tc.in, out)
			}
			continue
		}
		if err != nil || string(out) != tc.want || u != nil {
			t.Errorf("%s: %s %v %v", tc.in, out, u, err)
		}
	}
	e := tr.Error(&providers.Call{}, 400, []byte(`{"message":"The provided model doesn't support counting tokens."}`))
	if gjson.GetBytes(e, "type").Str != "error" || gjson.GetBytes(e, "error.type").Str != "invalid_request_error" ||
		!strings.Contains(gjson.GetBytes(e, "error.message").Str, "counting tokens") {
		t.Fatalf("error %s", e)
	}
}
