package handlers

import (
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestShapeStreamAgreesWithCheckAnswer: the incremental check accepts
// exactly what checkAnswer accepts, and reads the same usage, however
// the answer is split into writes.
func TestShapeStreamAgreesWithCheckAnswer(t *testing.T) {
	chat := providers.OpChat
	tests := []struct {
		op   providers.Operation
		body string
	}{
		{chat, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hé\u00e9 \"q\" \\ 😀"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`},
		{chat, ` {"choices":[],"n":-0.5e+10,"m":0,"k":12.25E-3,"t":true,"f":false,"z":null,"a":[1,[2,{}],{"b":[]}]} `},
		{chat, `{"choices":{}}`},
		{chat, `{"id":"x"}`},
		{chat, `{"id":"x","choices":[`},
		{chat, `{"choices":[]`},
		{chat, `{"choices":[]}}`},
		{chat, `{"choices":[]} x`},
		{chat, `["choices"]`},
		{chat, `"choices"`},
		{chat, `<html>maintenance</html>`},
		{chat, ``},
		{chat, `{"choices":[01]}`},
		{chat, `{"choices":[1.]}`},
		{chat, `{"choices":[-]}`},
		{chat, `{"choices":[1e]}`},
		{chat, `{"choices":[tru]}`},
		{chat, `{"choices":[nul]}`},
		{chat, `{"choices":[],}`},
		{chat, `{"choices" []}`},
		{chat, `{"choices":[1,]}`},
		{chat, `{"choices":["\x"]}`},
		{chat, `{"choices":["\u12G4"]}`},
		{chat, "{\"choices\":[\"a\x01\"]}"},
		{chat, "{\"choices\":[\"\xff\"]}"},
		{chat, "{\"choices\":[\"\xe2\x82\"]}"},
		{chat, "{\"choices\":[\"\xed\xa0\x80\"]}"},
		{chat, `{"choices":[]` + strings.Repeat(`,"p":`+strings.Repeat("[", 130)+strings.Repeat("]", 130), 1) + `}`},
		{chat, `{"nested":{"choices":[]}}`},
		{chat, `{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"choices":[{"x":{"usage":{"prompt_tokens":99}}}]}`},
		{providers.OpEmbeddings, `{"object":"list","data":[{"embedding":[0.1,-0.2]}],"usage":{"prompt_tokens":4,"total_tokens":4}}`},
		{providers.OpEmbeddings, `{"object":"list","choices":[]}`},
		{providers.OpCompletions, `{"choices":[{"text":"x"}]}`},
	}
	for _, tt := range tests {
		wantUsage, wantErr := checkAnswer(tt.op, []byte(tt.body))
		for _, split := range []int{1, 2, 3, 7, 1 << 20} {
			s := newShapeStream(tt.op)
			var werr error
			for b := []byte(tt.body); len(b) > 0 && werr == nil; {
				n := min(split, len(b))
				_, werr = s.Write(b[:n])
				b = b[n:]
			}
			usage, err := s.Close()
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%q split %d: stream error %v (write %v), checkAnswer %v", tt.body, split, err, werr, wantErr)
			}
			if (usage == nil) != (wantUsage == nil) || usage != nil && *usage != *wantUsage {
				t.Fatalf("%q split %d: usage %+v, checkAnswer %+v", tt.body, split, usage, wantUsage)
			}
		}
	}
}

// TestShapeStreamConstantMemory: a long answer is checked without
// holding it (the machine keeps its container stack and usage only).
func TestShapeStreamConstantMemory(t *testing.T) {
	s := newShapeStream(providers.OpChat)
	s.Write([]byte(`{"choices":[{"message":{"content":"`))
	chunk := []byte(strings.Repeat("abcdefgh", 4096))
	allocs := testing.AllocsPerRun(100, func() { s.Write(chunk) })
	if allocs != 0 {
		t.Fatalf("%v allocations per write", allocs)
	}
	s.Write([]byte(`"}}]}`))
	if _, err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
