package vertex

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// A count_tokens call to a Claude model goes to the one count-tokens
// endpoint, publishers/anthropic/models/count-tokens:rawPredict, with the
// client's body naming the model's bare id and Vertex AI's
// anthropic_version; the answer, {"input_tokens":N}, passes as it is.
func TestPrepareCountTokens(t *testing.T) {
	cases := []struct {
		model, body, version string
	}{
		{"claude-sonnet-4-5@20250929", `{"model":"claude-sonnet-4-5@20250929","messages":[{"role":"user","content":"hi"}]}`, "vertex-2023-10-16"},
		{"anthropic/claude-3-5-haiku@20241022", `{"model":"anthropic/claude-3-5-haiku@20241022","anthropic_version":"vertex-2099","messages":[{"role":"user","content":"hi"}]}`, "vertex-2099"},
	}
	for _, tc := range cases {
		c := &providers.Call{Op: providers.OpCountTokens, Method: "POST", Model: tc.model, Stream: true, Body: []byte(tc.body),
			Header: http.Header{"Anthropic-Beta": {"context-1m-2025-08-07"}}}
		u, err := prepare(&provider{}, c, &providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CloudCRegion: "us-east5"})
		if err != nil {
			t.Fatal(err)
		}
		want := "https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"
		b := gjson.ParseBytes(u.Body)
		_, bare, _ := SplitModel(tc.model)
		if u.URL.String() != want || u.Method != "POST" || c.Stream || u.Header.Get("Authorization") != "Bearer tok" || u.Header.Get("Anthropic-Beta") != "context-1m-2025-08-07" ||
			b.Get("model").Str != bare || b.Get("anthropic_version").Str != tc.version || b.Get("messages.0.content").Str != "hi" {
			t.Fatalf("%s: %s %v %s", tc.model, u.URL, u.Header, u.Body)
		}
	}
	// A Gemini model counts with its own countTokens, the Messages body
	// translated into generateContent members at the top level.
	c := &providers.Call{Op: providers.OpCountTokens, Method: "POST", Model: "gemini-2.5-pro", Stream: true, Header: http.Header{},
		Body: []byte(`{"model":"gemini-2.5-pro","system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`)}
	u, err := prepare(&provider{}, c, &providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CloudCRegion: "us-east5"})
	if err != nil {
		t.Fatal(err)
	}
	b := gjson.ParseBytes(u.Body)
	if u.URL.String() != "https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/publishers/google/models/gemini-2.5-pro:countTokens" ||
		c.Stream || b.Get("contents.0.parts.0.text").Str != "hi" || b.Get("systemInstruction.parts.0.text").Str != "Be brief." || b.Get("generateContentRequest").Exists() {
		t.Fatalf("gemini: %s %s", u.URL, u.Body)
	}
	c = &providers.Call{Op: providers.OpCountTokens, Method: "POST", Model: "gemini-2.5-pro", Body: []byte(`{"model":"gemini-2.5-pro"}`), Header: http.Header{}}
	if _, err := prepare(&provider{}, c, &providers.Settings{APIKey: "tok", CloudCProjectID: "proj"}); err == nil {
		t.Fatal("a count_tokens body without messages was sent")
	}
	tr := (&provider{}).Translator(providers.OpCountTokens)
	if out, u, err := tr.Response(&providers.Call{}, []byte(`{"input_tokens":14}`)); err != nil || string(out) != `{"input_tokens":14}` || u != nil {
		t.Fatalf("answer %s %v %v", out, u, err)
	}
	if out, _, err := tr.Response(&providers.Call{}, []byte(`{"totalTokens":14,"totalBillableCharacters":40}`)); err != nil || string(out) != `{"input_tokens":14}` {
		t.Fatalf("a Gemini count answer: %s %v", out, err)
	}
	if _, _, err := tr.Response(&providers.Call{}, []byte(`{"tokens":14}`)); err == nil {
		t.Fatal("an answer with no count was accepted")
	}
	e := tr.Error(&providers.Call{}, 404, []byte(`{"error":{"code":404,"message":"Publisher model not found","status":"NOT_FOUND"}}`))
	if gjson.GetBytes(e, "error.type").Str != "not_found_error" {
		t.Fatalf("error %s", e)
	}
}
