package routing

import (
	"strings"
	"testing"
)

// TestSessionOf: each source of a session key in its order, and the
// conversation hash stable over a conversation's turns.
func TestSessionOf(t *testing.T) {
	turn1 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`
	turn2 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"more"}]}`
	otherSystem := `{"model":"m","messages":[{"role":"system","content":"be long"},{"role":"user","content":"hello"}]}`
	tests := []struct {
		name string
		req  *Request
		src  string
		same *Request // when set, must give the same key
		diff *Request // when set, must give another key
	}{
		{"header", &Request{Session: "s1", Params: []byte(turn1)}, SessionHeader,
			&Request{Session: "s1", Params: []byte(otherSystem)}, &Request{Session: "s2", Params: []byte(turn1)}},
		{"header within the scope", &Request{Session: "s1", Scope: "ws-a"}, SessionHeader,
			nil, &Request{Session: "s1", Scope: "ws-b"}},
		{"metadata header", &Request{Metadata: map[string]string{"session_id": "m1"}}, SessionMetadata,
			nil, &Request{Session: "m1"}},
		{"body metadata", &Request{Params: []byte(`{"metadata":{"session_id":"b1"},"messages":[{"role":"user","content":"x"}]}`)}, SessionBody,
			&Request{Params: []byte(`{"metadata":{"session_id":"b1"},"messages":[{"role":"user","content":"y"}]}`)}, nil},
		{"prompt_cache_key", &Request{Params: []byte(`{"prompt_cache_key":"k1","input":"x"}`)}, SessionCacheKey,
			&Request{Params: []byte(`{"prompt_cache_key":"k1","input":"y"}`)}, &Request{Params: []byte(`{"prompt_cache_key":"k2","input":"x"}`)}},
		{"conversation", &Request{Params: []byte(turn1)}, SessionConversaton,
			&Request{Params: []byte(turn2)}, &Request{Params: []byte(otherSystem)}},
		{"anthropic system", &Request{Params: []byte(`{"system":"s","messages":[{"role":"user","content":"q"}]}`)}, SessionConversaton,
			&Request{Params: []byte(`{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`)},
			&Request{Params: []byte(`{"system":"t","messages":[{"role":"user","content":"q"}]}`)}},
		{"responses", &Request{Params: []byte(`{"instructions":"i","input":[{"role":"user","content":"q"}]}`)}, SessionConversaton,
			&Request{Params: []byte(`{"instructions":"i","input":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`)}, nil},
		{"no user turn", &Request{Params: []byte(`{"model":"m","prompt":"x"}`)}, "", nil, nil},
		{"previous_response_id alone", &Request{Params: []byte(`{"previous_response_id":"resp_1"}`)}, "", nil, nil},
		{"nothing", &Request{}, "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, src := sessionOf(tt.req)
			if src != tt.src {
				t.Fatalf("source %q, want %q", src, tt.src)
			}
			if tt.same != nil {
				if k, _ := sessionOf(tt.same); k != key {
					t.Error("the same session got another key")
				}
			}
			if tt.diff != nil {
				if k, _ := sessionOf(tt.diff); k == key {
					t.Error("another session got the same key")
				}
			}
		})
	}
}

// TestSessionHashBounded: the conversation key hashes the first
// maxTurnHashed bytes of the system prompt and of the first user turn:
// prompts that differ only beyond that share a key, earlier differences
// do not; escaped roles are read as decoded.
func TestSessionHashBounded(t *testing.T) {
	long := strings.Repeat("a", maxTurnHashed)
	body := func(system, user, role string) []byte {
		return []byte(`{"messages":[{"role":"system","content":"` + system + `"},{"role":"` + role + `","content":"` + user + `"}]}`)
	}
	key := func(b []byte) uint64 {
		h, src := sessionOf(&Request{Params: b})
		if src != SessionConversaton {
			t.Fatalf("source %q for %s", src, b)
		}
		return h
	}
	base := key(body(long+"x", "hi", "user"))
	if key(body(long+"y", "hi", "user")) != base {
		t.Fatal("a difference past the bound changed the key")
	}
	if key(body("b"+long, "hi", "user")) == base || key(body(long+"x", "ho", "user")) == base {
		t.Fatal("a difference within the bound kept the key")
	}
	if key(body(long+"x", "hi", `\u0075ser`)) != base {
		t.Fatal("an escaped role was not read as user")
	}
}
