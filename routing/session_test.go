package routing

import "testing"

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
