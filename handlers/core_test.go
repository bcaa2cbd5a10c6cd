package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

func testTarget() *routing.Target {
	return &routing.Target{Path: "config.targets[1]", Settings: providers.Settings{Provider: "openai"}}
}

func TestResponderHeld(t *testing.T) {
	body := []byte(`{"id":"x","choices":[]}`)
	tests := []struct {
		name       string
		alias      bool
		envelope   bool
		status     int
		wantPrefix string
	}{
		{"plain", false, false, 200, `{"id":"x"`},
		{"alias headers", true, false, 200, `{"id":"x"`},
		{"envelope wraps a success", false, true, 200, `{"status":"success","headers":{`},
		{"envelope leaves an error", false, true, 429, `{"id":"x"`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		o := &responder{w: rec, traceID: "tr-1", alias: tt.alias}
		info := &answerInfo{target: testTarget(), try: 2, label: "MISS"}
		o.held(&heldAnswer{status: tt.status, header: http.Header{"Content-Type": {"application/json"}}, body: body}, info, tt.envelope)
		if rec.Code != tt.status || !strings.HasPrefix(rec.Body.String(), tt.wantPrefix) {
			t.Fatalf("%s: %d %s", tt.name, rec.Code, rec.Body)
		}
		h := rec.Header()
		for k, v := range map[string]string{"x-gateway-trace-id": "tr-1", "x-gateway-provider": "openai",
			"x-gateway-last-used-option-index": "config.targets[1]", "x-gateway-retry-attempt-count": "2", "x-gateway-cache-status": "MISS"} {
			if h.Get(k) != v {
				t.Errorf("%s: %s = %q", tt.name, k, h.Get(k))
			}
			alias := strings.Replace(k, ingress.Prefix, ingress.AliasPrefix, 1)
			if got := h.Get(alias); (got == v) != tt.alias {
				t.Errorf("%s: alias %s = %q", tt.name, alias, got)
			}
		}
		if tt.envelope && tt.status == 200 {
			var env struct {
				Headers map[string]string
				Body    json.RawMessage
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Headers["x-gateway-trace-id"] != "tr-1" || string(env.Body) != string(body) {
				t.Fatalf("%s: envelope %s (%v)", tt.name, rec.Body, err)
			}
		}
		// Only one answer is ever written.
		o.error(apierror.BadRequest("", "late"), nil)
		if strings.Contains(rec.Body.String(), "late") {
			t.Fatalf("%s: a second answer was written", tt.name)
		}
	}
}

func TestPlanAttemptsBodies(t *testing.T) {
	plain, over := testTarget(), testTarget()
	over.OverrideParams = map[string]json.RawMessage{"model": json.RawMessage(`"gpt-4o"`), "stream": json.RawMessage(`true`)}
	q := &Request{Identity: &identity.Caller{}, Call: providers.Call{Op: providers.OpChat, Body: []byte(`{"model":"m","messages":[]}`), Model: "m"},
		Plan: &routing.Plan{Leaves: []*routing.Target{plain, over}}}
	g := &Gateway{}
	if err := g.planAttempts(httptest.NewRequest("POST", "/v1/chat/completions", nil).Context(), q, nil, false); err != nil {
		t.Fatal(err)
	}
	if p := q.attemptFor(plain); string(p.body) != string(q.Call.Body) || p.model != "m" {
		t.Fatalf("plain target: %+v", p)
	}
	if p := q.attemptFor(over); p.model != "gpt-4o" || !p.stream || !strings.Contains(string(p.body), `"messages"`) {
		t.Fatalf("override target: %s", p.body)
	}
}

func TestCheckAnswer(t *testing.T) {
	tests := []struct {
		op    providers.Operation
		body  string
		ok    bool
		usage int64 // total tokens read, -1 for none
	}{
		{providers.OpChat, `{"choices":[]}`, true, -1},
		{providers.OpChat, `{"id":"x","choices":[{"index":0}],"usage":{"prompt_tokens":2,"completion_tokens":3}}`, true, 5},
		{providers.OpChat, `{"id":"x"}`, false, -1},
		{providers.OpChat, `{"choices":{}}`, false, -1},
		{providers.OpChat, `<html>`, false, -1},
		{providers.OpChat, `{"choices":[`, false, -1},
		{providers.OpChat, `[{"choices":[]}]`, false, -1},
		{providers.OpCompletions, `{"choices":[{"text":"a"}]}`, true, -1},
		{providers.OpEmbeddings, `{"data":[],"usage":{"prompt_tokens":4,"total_tokens":4}}`, true, 4},
		{providers.OpEmbeddings, `{"choices":[]}`, false, -1},
		{providers.OpChat, `{"choices":[],"usage":"lots"}`, true, -1},
		{providers.OpChat, `{"choices":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, false, -1},
	}
	for _, tt := range tests {
		usage, err := checkAnswer(tt.op, []byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("%s %.40s: %v", tt.op, tt.body, err)
			continue
		}
		got := int64(-1)
		if usage != nil {
			got = usage.TotalTokens
		}
		if got != tt.usage {
			t.Errorf("%s %.40s: usage %d, want %d", tt.op, tt.body, got, tt.usage)
		}
	}
}

func TestPlaceholders(t *testing.T) {
	f := &flight{}
	f.entry.TraceID, f.entry.KeyName, f.entry.Model = "tr", "key", "m"
	f.entry.Usage = &providers.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}
	f.out.info = &answerInfo{target: testTarget(), try: 1, label: "HIT"}
	want := map[string]any{"trace_id": "tr", "key_name": "key", "model": "m", "provider": "openai",
		"cache_status": "HIT", "last_used_option_index": "config.targets[1]", "retry_count": 1,
		"tokens.prompt": int64(1), "tokens.completion": int64(2), "tokens.total": int64(3)}
	for k, v := range want {
		got, ok := f.placeholder(PlaceholderPrefix + k)
		if !ok || got != v {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	if _, ok := f.placeholder("http.request.uri"); ok {
		t.Fatal("claimed a foreign placeholder")
	}
}
