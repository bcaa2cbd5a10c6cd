package gemini

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestCountRequest: a Messages count_tokens body becomes countTokens'
// generateContentRequest, naming the model and carrying the contents and
// the system instruction; Gemini's totalTokens is answered as
// input_tokens, and an answer without it is an error.
func TestCountRequest(t *testing.T) {
	body := []byte(`{"model":"gemini-2.5-flash","system":"Be brief.","messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi."},{"role":"user","content":"Count me."}]}`)
	out, err := CountRequest(body, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	g := gjson.GetBytes(out, "generateContentRequest")
	if g.Get("model").Str != "models/gemini-2.5-flash" || g.Get("contents.#").Int() != 3 ||
		g.Get("systemInstruction.parts.0.text").Str != "Be brief." || g.Get("contents.1.role").Str != "model" {
		t.Fatalf("countTokens body %s", out)
	}
	if _, err := CountRequest([]byte(`{"model":"m"}`), "m"); err == nil {
		t.Fatal("a body without messages was accepted")
	}
	tr := provider{}.Translator(providers.OpCountTokens)
	got, _, err := tr.Response(nil, []byte(`{"totalTokens":31,"promptTokensDetails":[{"modality":"TEXT","tokenCount":31}]}`))
	if err != nil || string(got) != `{"input_tokens":31}` {
		t.Fatalf("answer %s, %v", got, err)
	}
	for _, bad := range []string{`{"tokens":3}`, `{"totalTokens":"3"}`, `{"totalTokens":-1}`, `not json`} {
		if _, _, err := tr.Response(nil, []byte(bad)); err == nil {
			t.Fatalf("answer %s accepted", bad)
		}
	}
	if !(provider{}).SpeaksMessages(providers.OpCountTokens, "gemini-2.5-flash") || (provider{}).SpeaksMessages(providers.OpMessages, "gemini-2.5-flash") {
		t.Fatal("count_tokens is native, a Messages call is translated")
	}
}
