package cache

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

func TestKey(t *testing.T) {
	base := KeyParts{Op: "chat.completions", Method: "POST", Path: "/chat/completions", Target: "openai|default|abcd",
		Workspace: "ws", Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`)}
	baseKey, err := Key(base)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(p *KeyParts)
		same bool
	}{
		{"key order and spacing", func(p *KeyParts) {
			p.Body = []byte(`{ "temperature":0.5, "messages":[{"content":"hi","role":"user"}], "model":"m" }`)
		}, true},
		{"stream is not part of the key", func(p *KeyParts) {
			p.Body = []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"temperature":0.5}`)
		}, true},
		{"another body", func(p *KeyParts) { p.Body = []byte(`{"model":"m","messages":[],"temperature":0.5}`) }, false},
		{"numbers as written", func(p *KeyParts) {
			p.Body = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.50}`)
		}, false},
		{"another endpoint", func(p *KeyParts) { p.Op, p.Path = "completions", "/completions" }, false},
		{"another target", func(p *KeyParts) { p.Target = "openai|default|ef01" }, false},
		{"another workspace", func(p *KeyParts) { p.Workspace = "ws2" }, false},
		{"a namespace", func(p *KeyParts) { p.Namespace = "team-a" }, false},
		{"metadata partitions", func(p *KeyParts) { p.Metadata = `{"_user":"u1"}` }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			tt.edit(&p)
			k, err := Key(p)
			if err != nil {
				t.Fatal(err)
			}
			if (k == baseKey) != tt.same {
				t.Fatalf("same key = %v, want %v", k == baseKey, tt.same)
			}
		})
	}
	// The namespace replaces the metadata; metadata key order is irrelevant.
	ns := func(ns, md string) string {
		p := base
		p.Namespace, p.Metadata = ns, md
		k, _ := Key(p)
		return k
	}
	if ns("team", `{"a":"1"}`) != ns("team", `{"b":"2"}`) {
		t.Fatal("with a namespace, metadata must not matter")
	}
	if ns("", `{"a":"1","b":"2"}`) != ns("", `{ "b":"2","a":"1" }`) {
		t.Fatal("metadata key order must not matter")
	}
	if _, err := Key(KeyParts{Body: []byte(`[1,2]`)}); err == nil {
		t.Fatal("a body that is not an object is not cacheable")
	}
}

func TestStoreExpiry(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(1<<20, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Set("k", 200, []byte(`{"a":1}`), time.Minute) {
		t.Fatal("not stored")
	}
	if e, ok := s.Get("k"); !ok || string(e.Body) != `{"a":1}` {
		t.Fatal("miss right after a store")
	}
	now = now.Add(59 * time.Second)
	if _, ok := s.Get("k"); !ok {
		t.Fatal("expired early")
	}
	now = now.Add(time.Second)
	if _, ok := s.Get("k"); ok {
		t.Fatal("served after max_age")
	}
	if s.Set("big", 200, make([]byte, MaxEntrySize+1), time.Minute) {
		t.Fatal("an oversized answer was stored")
	}
	s.Close()
	if _, ok := s.Get("k"); ok || s.Set("k", 200, []byte("{}"), time.Minute) {
		t.Fatal("a closed store must miss and store nothing")
	}
}

func TestMaxAge(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		c    *routing.Cache
		want time.Duration
	}{
		{nil, DefaultMaxAge},
		{&routing.Cache{Mode: "simple"}, DefaultMaxAge},
		{&routing.Cache{Mode: "simple", MaxAge: i(0)}, DefaultMaxAge},
		{&routing.Cache{Mode: "simple", MaxAge: i(30)}, 30 * time.Second},
		{&routing.Cache{Mode: "simple", MaxAge: i(1 << 40)}, MaxMaxAge},
	}
	for _, tt := range tests {
		if got := MaxAge(tt.c); got != tt.want {
			t.Errorf("MaxAge(%+v) = %v, want %v", tt.c, got, tt.want)
		}
	}
}

const chatStream = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"system_fingerprint\":\"fp\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n" +
	"data: [DONE]\n\n"

const toolStream = "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"weather\",\"arguments\":\"{\\\"city\\\":\"}}]},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Oslo\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n" +
	"data: [DONE]\n\n"

const textStream = "data: {\"id\":\"t1\",\"object\":\"text_completion\",\"created\":7,\"model\":\"m\",\"choices\":[{\"text\":\" wor\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"t1\",\"object\":\"text_completion\",\"created\":7,\"model\":\"m\",\"choices\":[{\"text\":\"ld\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n"

func TestAssemble(t *testing.T) {
	tests := []struct {
		name string
		sse  string
		want string // substrings of the assembled JSON; "" = not assemblable
	}{
		{"chat", chatStream, `"object":"chat.completion"|"content":"Hello"|"finish_reason":"stop"|"total_tokens":12|"system_fingerprint":"fp"|"role":"assistant"`},
		{"tool calls", toolStream, `"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]|"finish_reason":"tool_calls"`},
		{"text completion", textStream, `"object":"text_completion"|"text":" world"`},
		{"CRLF framing", strings.ReplaceAll(chatStream, "\n", "\r\n"), `"content":"Hello"`},
		{"no [DONE]", strings.TrimSuffix(chatStream, "data: [DONE]\n\n"), ""},
		{"error event", strings.Replace(chatStream, "data: [DONE]", `data: {"error":{"message":"boom"}}`+"\n\ndata: [DONE]", 1), ""},
		{"another kind of stream", "data: {\"type\":\"response.created\"}\n\ndata: [DONE]\n\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Assemble([]byte(tt.sse))
			if tt.want == "" {
				if ok {
					t.Fatalf("assembled %s", got)
				}
				return
			}
			if !ok {
				t.Fatal("not assembled")
			}
			for _, w := range strings.Split(tt.want, "|") {
				if !bytes.Contains(got, []byte(w)) {
					t.Fatalf("%s\nlacks %s", got, w)
				}
			}
		})
	}
}

// TestSynthesizeRoundTrip: an answer stored from a stream, replayed as a
// stream, assembles to the same answer.
func TestSynthesizeRoundTrip(t *testing.T) {
	for _, sse := range []string{chatStream, toolStream, textStream} {
		stored, ok := Assemble([]byte(sse))
		if !ok {
			t.Fatal("not assembled")
		}
		replay, ok := Synthesize(stored, true)
		if !ok || !bytes.HasSuffix(replay, []byte("data: [DONE]\n\n")) {
			t.Fatalf("replay %q", replay)
		}
		again, ok := Assemble(replay)
		if !ok || !jsonEqual(again, stored) {
			t.Fatalf("round trip changed the answer:\n%s\n%s", stored, again)
		}
	}
}

func TestSynthesizeUsageOnlyWhenAsked(t *testing.T) {
	body := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	without, _ := Synthesize(body, false)
	with, _ := Synthesize(body, true)
	if bytes.Contains(without, []byte(`"usage"`)) || !bytes.Contains(with, []byte(`"choices":[],"usage":{"prompt_tokens":1`)) {
		t.Fatalf("usage chunk: without=%s\nwith=%s", without, with)
	}
	if _, ok := Synthesize([]byte(`{"object":"list","data":[]}`), false); ok {
		t.Fatal("embeddings have no stream form")
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func BenchmarkKey(b *testing.B) {
	p := KeyParts{Op: "chat.completions", Method: "POST", Path: "/chat/completions", Target: "openai|default|abcd", Workspace: "ws",
		Body: []byte(`{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is the capital of Norway? Answer in one word."}]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Key(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIsHit: only the two hit statuses mean "answered from the cache";
// the ledger and the rate limiter charge nothing for them.
func TestIsHit(t *testing.T) {
	for status, want := range map[string]bool{
		StatusHit: true, StatusSemanticHit: true,
		StatusMiss: false, StatusRefresh: false, StatusDisabled: false, StatusSemanticMiss: false,
		"": false, "hit": false,
	} {
		if IsHit(status) != want {
			t.Errorf("IsHit(%q) = %v", status, !want)
		}
	}
}
