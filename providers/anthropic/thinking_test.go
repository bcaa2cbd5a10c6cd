package anthropic

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// A conversation a translated target began (its thinking block unsigned)
// goes on with a native one without that block, which Anthropic would
// refuse; a signed block is sent back as it is. The same holds for
// count_tokens and for the clouds' bodies (CloudBody).
func TestUnsignedThinkingNotSent(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":9,"messages":[{"role":"user","content":"a"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"from a chat target","signature":""},{"type":"text","text":"b"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"from Claude","signature":"EqQBCkgIARAB"},{"type":"text","text":"c"}]},{"role":"user","content":"d"}]}`
	check := func(name string, sent []byte) {
		t.Helper()
		if n := gjson.GetBytes(sent, "messages.1.content.#").Int(); n != 1 || gjson.GetBytes(sent, "messages.1.content.0.text").Str != "b" ||
			gjson.GetBytes(sent, "messages.2.content.0.signature").Str != "EqQBCkgIARAB" {
			t.Fatalf("%s sent %s", name, sent)
		}
	}
	for _, op := range []providers.Operation{providers.OpMessages, providers.OpCountTokens} {
		c := &providers.Call{Op: op, Method: http.MethodPost, Path: "/messages", Body: []byte(body), Header: http.Header{}}
		u := providers.Upstream{Header: http.Header{}}
		if err := (provider{}).Prepare(c, &providers.Settings{APIKey: "k"}, &u); err != nil {
			t.Fatal(err)
		}
		check(string(op), u.Body)
	}
	out, err := CloudBody([]byte(body), "vertex-2023-10-16")
	if err != nil {
		t.Fatal(err)
	}
	check("CloudBody", out)
}
