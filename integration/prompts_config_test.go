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

// TestPromptIDTargetsUseSavedProviders: targets that name only a
// prompt_id reach the provider saved with each prompt — one a provider
// with a custom host, the other a virtual key — so a config routes
// between prompts kept on different providers.
func TestPromptIDTargetsUseSavedProviders(t *testing.T) {
	first := newScripted(t, reply{status: 503})
	second := newFakeOpenAI(t)
	s := newPromptSite(t, fmt.Sprintf("virtual_key vk-second {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}", second.URL))
	s.writePrompt(t, "on-first.json", fmt.Sprintf(`{"name":"On first","published":1,"versions":[
		{"messages":[{"role":"user","content":"first {{q}}"}],"model":"m1","provider":"openai","provider_settings":{"custom_host":%q}}]}`, first.URL))
	s.writePrompt(t, "on-second.json", `{"name":"On second","published":1,"versions":[
		{"messages":[{"role":"user","content":"second {{q}}"}],"model":"m2","virtual_key":"vk-second"}]}`)
	s.load(t)
	settleReload()
	config := `{"strategy":{"mode":"fallback"},"targets":[{"prompt_id":"on-first"},{"prompt_id":"on-second"}]}`

	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"messages":[],"variables":{"q":"hi"}}`),
		"x-gateway-config", config, "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 || resp.Header.Get("x-gateway-last-used-option-index") != "config.targets[1]" {
		t.Fatalf("status %d via %s: %s", resp.StatusCode, resp.Header.Get("x-gateway-last-used-option-index"), raw)
	}
	if s1 := lastSent(t, first.fakeOpenAI); messagesOf(s1) != "user:first hi" || s1.Model != "m1" {
		t.Fatalf("first prompt's provider got %+v", s1)
	}
	if got := first.last().Header.Get("Authorization"); got != "Bearer sk-test-provider" {
		t.Fatalf("a provider saved without credentials takes the caller's token, got %q", got)
	}
	if s2 := lastSent(t, second); messagesOf(s2) != "user:second hi" || s2.Model != "m2" {
		t.Fatalf("second prompt's virtual key got %+v", s2)
	}

	// A prompt that saves no provider, with none in the target or headers.
	s.writePrompt(t, "nowhere.json", `{"name":"Nowhere","published":1,"versions":[{"messages":[{"role":"user","content":"x"}],"model":"m"}]}`)
	s.load(t)
	settleReload()
	resp, raw = do(t, "POST", "/chat/completions", []byte(`{"messages":[],"variables":{}}`),
		"x-gateway-config", `{"prompt_id":"nowhere"}`)
	if resp.StatusCode != 400 || !strings.Contains(string(raw), "names no provider") {
		t.Fatalf("no provider anywhere: %d %s", resp.StatusCode, raw)
	}
}
