package handlers

import (
	"encoding/json"
	"testing"
)

// FuzzReadModelLastWins: whenever the gateway's strict check accepts a
// body, the model it reads (readModelStream) is the model a last-wins
// decoder (encoding/json, as a provider reads the body it is forwarded)
// reads, whatever members repeat or are escaped in the input.
func FuzzReadModelLastWins(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o-mini","model":"o3"}`,
		`{"model":"gpt-4o-mini","mod\u0065l":"o3"}`,
		`{"m\u006fdel":"o\u0033","stream":true}`,
		`{"model":"\ud800\u0041"}`,
		`{"model":"a","\ud800":"b"}`,
		`{"messages":[{"model":"x"}],"model":"y"}`,
		`{"model":5}`,
		`{"model":"😀","\ud83d\ude00":1,"😀":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkJSONObject(b) != nil {
			return
		}
		var last map[string]any
		if err := json.Unmarshal(b, &last); err != nil {
			t.Fatalf("encoding/json refuses %q, which the gateway accepts: %v", b, err)
		}
		got, _ := readModelStream(b)
		if want, ok := last["model"].(string); ok && got != want {
			t.Fatalf("model of %q: gateway %q, last-wins decoder %q", b, got, want)
		}
		if _, present := last["model"]; !present && got != "" {
			t.Fatalf("model of %q: gateway %q, last-wins decoder none", b, got)
		}
	})
}
