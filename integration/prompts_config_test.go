package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const routedPrompt = `{
  "name": "Routed",
  "published": 1,
  "versions": [
    {"messages": [{"role": "user", "content": "v1 {{q}}"}], "model": "gpt-4o-mini", "hyperparameters": {"temperature": 0.1}},
    {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "v2 {{q}}"}], "model": "gpt-4o"}
  ]
}`

// TestPromptIDInConfigFallback routes between two versions of a prompt
// on two providers: the first answers 503, the fallback renders the other
// version and succeeds.
func TestPromptIDInConfigFallback(t *testing.T) {
	first := newScripted(t, reply{status: 503})
	second := newFakeOpenAI(t)
	s := newPromptSite(t, "")
	s.writePrompt(t, "routed.json", routedPrompt)
	s.load(t)
	settleReload()
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	config := compactJSON(t, fmt.Sprintf(`{
		"strategy": {"mode": "fallback"},
		"targets": [%s, %s]
	}`, target(first.fakeOpenAI, `"prompt_id":"routed@1"`), target(second, `"prompt_id":"routed@2"`)))

	// Through the prompt completions endpoint: the config header names
	// the provider, and each target renders its own version.
	var pc promptCompletion
	call(t, "POST", "/prompts/routed/completions", `{"variables":{"q":"hi"},"max_tokens":7}`, 200, &pc,
		"x-gateway-config", config, "x-gateway-trace-id", "prompt-config-1")
	if pc.Status != "success" || pc.Body.Model != "gpt-4o" || pc.Headers["x-gateway-last-used-option-index"] != "config.targets[1]" {
		t.Fatalf("envelope: %+v", pc)
	}
	s1 := lastSent(t, first.fakeOpenAI)
	if messagesOf(s1) != "user:v1 hi" || s1.Model != "gpt-4o-mini" || *s1.Temperature != 0.1 || *s1.MaxTokens != 7 {
		t.Fatalf("first target got %+v", s1)
	}
	s2 := lastSent(t, second)
	if messagesOf(s2) != "system:be brief|user:v2 hi" || s2.Model != "gpt-4o" || s2.Temperature != nil || *s2.MaxTokens != 7 {
		t.Fatalf("fallback target got %+v", s2)
	}
	if got := lastAttempts(t); got != "config.targets[0]:fallback:503 config.targets[1]:ok:200" {
		t.Fatalf("attempts: %s", got)
	}
	// The log names the version that answered.
	if line := logLineFor(t, "prompt-config-1"); !strings.Contains(line, `"prompt_version":2`) {
		t.Fatalf("log entry: %s", line)
	}

	// Through /v1/chat/completions: the body's variables render each
	// target's prompt; the answer is a plain chat completion.
	resp, raw := do(t, "POST", "/chat/completions",
		[]byte(`{"messages":[{"role":"user","content":"ignored"}],"variables":{"q":"yo"},"stream":false}`),
		"x-gateway-config", config)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"object":"chat.completion"`) || strings.Contains(string(raw), `"status":"success"`) {
		t.Fatalf("chat completion: %d %s", resp.StatusCode, raw)
	}
	if s2 := lastSent(t, second); messagesOf(s2) != "system:be brief|user:v2 yo" || s2.Model != "gpt-4o" {
		t.Fatalf("fallback target got %+v", s2)
	}

	// A variable missing at attempt time is a 400 for each target, and no
	// provider is called.
	n1, n2 := first.count(), second.count()
	resp, raw = do(t, "POST", "/chat/completions", []byte(`{"messages":[],"variables":{}}`), "x-gateway-config", config)
	if resp.StatusCode != 400 || !strings.Contains(string(raw), `"param":"variables.q"`) || first.count() != n1 || second.count() != n2 {
		t.Fatalf("missing variable: %d %s", resp.StatusCode, raw)
	}

	// Streamed through the fallback.
	first.set(reply{status: 503})
	resp, raw = do(t, "POST", "/prompts/routed/completions", []byte(`{"variables":{"q":"s"},"stream":true}`), "x-gateway-config", config)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "data: [DONE]") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, raw)
	}
	if s2 := lastSent(t, second); !s2.Stream || messagesOf(s2) != "system:be brief|user:v2 s" {
		t.Fatalf("streamed fallback target got %+v", s2)
	}
}
