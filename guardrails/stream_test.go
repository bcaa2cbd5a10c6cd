package guardrails_test

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

func TestStreamText(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		max    int
		want   string
		trunc  bool
	}{
		{"chat deltas", []string{`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`, `{"choices":[{"index":0,"delta":{"content":"lo"}}]}`,
			`{"choices":[{"index":1,"delta":{"content":"other choice"}}]}`, `{"choices":[],"usage":{}}`, `[DONE]`}, 0, "Hello", false},
		{"completions", []string{`{"choices":[{"index":0,"text":"a"}]}`, `{"choices":[{"index":0,"text":"b"}]}`}, 0, "ab", false},
		{"responses", []string{`{"type":"response.created"}`, `{"type":"response.output_text.delta","delta":"x"}`,
			`{"type":"response.output_text.delta","delta":"y"}`}, 0, "xy", false},
		{"messages", []string{`{"type":"content_block_delta","delta":{"type":"text_delta","text":"m"}}`}, 0, "m", false},
		{"capped", []string{`{"choices":[{"index":0,"delta":{"content":"abcdef"}}]}`, `{"choices":[{"index":0,"delta":{"content":"gh"}}]}`}, 4, "abcd", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := guardrails.StreamText{Max: tc.max}
			for _, e := range tc.events {
				st.Add([]byte(e))
			}
			if st.String() != tc.want || st.Truncated() != tc.trunc {
				t.Fatalf("text %q truncated %v", st.String(), st.Truncated())
			}
		})
	}
}

func TestCanDeny(t *testing.T) {
	rn := &guardrails.Runner{}
	tests := []struct {
		name string
		hook []string
		want bool
	}{
		{"none", nil, false},
		{"no deny", []string{`{"id":"a",` + hasDigits + `}`}, false},
		{"top-level deny", []string{`{"id":"a",` + hasDigits + `}`, `{"id":"b","deny":true,` + hasDigits + `}`}, true},
		{"on_fail deny", []string{`{"id":"a","on_fail":{"deny":true},` + hasDigits + `}`}, true},
		{"async deny never denies", []string{`{"id":"a","async":true,"deny":true,` + hasDigits + `}`}, false},
	}
	for _, tc := range tests {
		got, err := rn.CanDeny(guardrails.AfterRequest, hooks(tc.hook...))
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := rn.CanDeny(guardrails.AfterRequest, hooks(`{"id":"x","checks":[{"id":"nope","parameters":{}}]}`)); err == nil {
		t.Error("compile errors must be reported")
	}
}
