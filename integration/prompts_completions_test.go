package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// promptVKs are virtual keys for prompt completion tests: vk-prompt is
// the one the prompt files save; vk-other and vk-bad are for requests.
func promptVKs(prompt, other *fakeOpenAI) string {
	return `
		virtual_key vk-prompt {
			provider openai
			api_key sk-test-provider
			custom_host ` + prompt.URL + `
		}
		virtual_key vk-other {
			provider openai
			api_key sk-test-provider
			custom_host ` + other.URL + `
		}
		virtual_key vk-bad {
			provider openai
			api_key sk-wrong
			custom_host ` + prompt.URL + `
		}`
}

const supportPrompt = `{
  "name": "Support",
  "published": 1,
  "versions": [
    {"messages": [{"role": "system", "content": "You help {{name}}."}, {"role": "user", "content": "{{question}}"}],
     "model": "gpt-4o-mini", "virtual_key": "vk-prompt", "hyperparameters": {"temperature": 0.2, "max_tokens": 50}},
    {"messages": [{"role": "user", "content": "v2 {{question}}"}], "model": "gpt-4o", "virtual_key": "vk-prompt"}
  ]
}`

// promptCompletion is the envelope of a non-streamed prompt completion.
type promptCompletion struct {
	Status  string            `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	} `json:"body"`
}

// sentChat decodes what a fake provider last received.
type sentChat struct {
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   *int     `json:"max_tokens"`
	Stream      bool     `json:"stream"`
	Variables   any      `json:"variables"`
	Messages    []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func lastSent(t *testing.T, up *fakeOpenAI) sentChat {
	t.Helper()
	var s sentChat
	last := up.last()
	if last.Path != "/v1/chat/completions" {
		t.Fatalf("the provider got %s %s", last.Method, last.Path)
	}
	if err := json.Unmarshal(last.Body, &s); err != nil {
		t.Fatalf("the provider got %s: %v", last.Body, err)
	}
	if s.Variables != nil {
		t.Fatalf("variables reached the provider: %s", last.Body)
	}
	return s
}

func messagesOf(s sentChat) string {
	var parts []string
	for _, m := range s.Messages {
		parts = append(parts, m.Role+":"+m.Content)
	}
	return strings.Join(parts, "|")
}

func newPromptCompletionSite(t *testing.T) (*promptSite, *fakeOpenAI, *fakeOpenAI) {
	t.Helper()
	up, other := newFakeOpenAI(t), newFakeOpenAI(t)
	s := newPromptSite(t, promptVKs(up, other))
	s.writePrompt(t, "support.json", supportPrompt)
	s.writePrompt(t, "draft.json", `{"name":"Draft","versions":[{"messages":[{"role":"user","content":"{{x}}"}],"virtual_key":"vk-prompt"}]}`)
	s.writePrompt(t, "broken.json", `{"name":"Broken","published":1,"versions":[{"messages":[{"role":"user","content":"{{x}}"}],"model":"m","virtual_key":"vk-bad"}]}`)
	s.load(t)
	settleReload()
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	return s, up, other
}

const supportVars = `"variables":{"name":"Ada","question":"Why?"}`

func TestPromptCompletions(t *testing.T) {
	_, up, other := newPromptCompletionSite(t)

	// Bare: the published version, its saved virtual key and
	// hyperparameters, with the request's override on top.
	var pc promptCompletion
	call(t, "POST", "/prompts/support/completions", `{`+supportVars+`,"temperature":0.9}`, 200, &pc, "x-gateway-trace-id", "prompt-trace-1")
	if pc.Status != "success" || pc.Body.Object != "chat.completion" || len(pc.Body.Choices) != 1 ||
		pc.Body.Choices[0].Message.Content != "Hello!" || pc.Body.Choices[0].Message.Role != "assistant" ||
		pc.Body.Model != "gpt-4o-mini" || pc.Body.Usage.TotalTokens != 12 {
		t.Fatalf("envelope: %+v", pc)
	}
	if !strings.HasPrefix(pc.Headers["content-type"], "application/json") || pc.Headers["x-gateway-trace-id"] != "prompt-trace-1" ||
		pc.Headers["x-gateway-provider"] != "openai" || pc.Headers["x-gateway-retry-attempt-count"] != "0" {
		t.Fatalf("envelope headers: %v", pc.Headers)
	}
	sent := lastSent(t, up)
	if messagesOf(sent) != "system:You help Ada.|user:Why?" || sent.Model != "gpt-4o-mini" ||
		sent.Temperature == nil || *sent.Temperature != 0.9 || sent.MaxTokens == nil || *sent.MaxTokens != 50 || sent.Stream {
		t.Fatalf("the provider got %+v", sent)
	}

	// The log entry names the prompt and version, as a chat completion.
	var rec promptRecord
	call(t, "GET", "/prompts/support", "", 200, &rec)
	line := logLineFor(t, "prompt-trace-1")
	for _, want := range []string{`"prompt_id":"` + rec.ID + `"`, `"prompt_version":1`, `"endpoint":"chat.completions"`, `"status":200`} {
		if !strings.Contains(line, want) {
			t.Fatalf("log entry lacks %s: %s", want, line)
		}
	}

	// Suffixes.
	call(t, "POST", "/prompts/support@latest/completions", `{`+supportVars+`}`, 200, &pc)
	if sent := lastSent(t, up); messagesOf(sent) != "user:v2 Why?" || sent.Model != "gpt-4o" || sent.Temperature != nil {
		t.Fatalf("@latest: the provider got %+v", sent)
	}
	call(t, "POST", "/prompts/"+rec.ID+"@1/completions", `{`+supportVars+`}`, 200, &pc)
	if sent := lastSent(t, up); messagesOf(sent) != "system:You help Ada.|user:Why?" || *sent.Temperature != 0.2 {
		t.Fatalf("@1 by id: the provider got %+v", sent)
	}

	// A request that names its provider wins over the prompt's saved
	// virtual key: by virtual key, and by provider with Authorization
	// and a custom host.
	n := up.count()
	for _, h := range [][]string{
		{"x-gateway-virtual-key", "vk-other"},
		{"x-gateway-provider", "openai", "x-gateway-custom-host", other.URL, "Authorization", "Bearer sk-test-provider"},
		{"x-gateway-config", `{"virtual_key":"vk-other"}`},
	} {
		before := other.count()
		pc = promptCompletion{}
		call(t, "POST", "/prompts/support/completions", `{`+supportVars+`}`, 200, &pc, h...)
		if pc.Status != "success" || other.count() != before+1 {
			t.Fatalf("%v: not sent to the request's provider: %+v", h, pc)
		}
		if sent := lastSent(t, other); messagesOf(sent) != "system:You help Ada.|user:Why?" || *sent.MaxTokens != 50 {
			t.Fatalf("%v: the provider got %+v", h, sent)
		}
	}
	if up.count() != n {
		t.Fatal("the prompt's saved virtual key was used although the request named a provider")
	}
}

func TestPromptCompletionsStream(t *testing.T) {
	_, up, _ := newPromptCompletionSite(t)
	resp, raw := doRetry(t, "POST", "/prompts/support/completions", `{`+supportVars+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var content strings.Builder
	done, usage := false, 0
	for _, l := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage.TotalTokens
		}
	}
	if content.String() != "Hello!" || !done || usage != 12 {
		t.Fatalf("stream content %q done %v usage %d: %s", content.String(), done, usage, raw)
	}
	if sent := lastSent(t, up); !sent.Stream || messagesOf(sent) != "system:You help Ada.|user:Why?" {
		t.Fatalf("the provider got %+v", sent)
	}
}

func TestPromptCompletionsErrors(t *testing.T) {
	_, up, _ := newPromptCompletionSite(t)
	cases := []struct {
		name, ref, body string
		status          int
		param, code     string
	}{
		{"unpublished bare", "draft", `{"variables":{"x":1}}`, 404, "", "prompt_not_published"},
		{"unknown prompt", "nope", `{"variables":{}}`, 404, "", "prompt_not_found"},
		{"unknown version", "support@9", `{` + supportVars + `}`, 404, "", "prompt_version_not_found"},
		{"bad suffix", "support@production", `{` + supportVars + `}`, 400, "promptId", "invalid_prompt_version"},
		{"missing variable", "support", `{"variables":{"name":"Ada"}}`, 400, "variables.question", "missing_variable"},
		{"no variables", "support", `{"temperature":1}`, 400, "variables", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := up.count()
			e := callErr(t, "POST", "/prompts/"+c.ref+"/completions", c.body, c.status)
			if e.Error.Param != c.param || (c.code != "" && e.Error.Code != c.code) {
				t.Fatalf("param %q code %q, want %q %q: %s", e.Error.Param, e.Error.Code, c.param, c.code, e.Error.Message)
			}
			if up.count() != n {
				t.Fatal("a failed prompt reached the provider")
			}
		})
	}
	e := callErr(t, "POST", "/prompts/draft/completions", `{"variables":{"x":1}}`, 404)
	if !strings.Contains(e.Error.Message, "no published version") {
		t.Fatalf("unpublished message: %s", e.Error.Message)
	}
	// The draft is callable by number.
	call(t, "POST", "/prompts/draft@1/completions", `{"variables":{"x":1}}`, 200, nil)

	// A provider's error keeps the OpenAI envelope and its status: it is
	// not wrapped as a prompt completion.
	resp, raw := doRetry(t, "POST", "/prompts/broken/completions", `{"variables":{"x":1}}`)
	var env struct {
		Status any `json:"status"`
		Error  struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || resp.StatusCode != 401 || env.Error.Code != "invalid_api_key" || env.Status != nil {
		t.Fatalf("provider error: %d %s", resp.StatusCode, raw)
	}
}

// TestPromptCompletionsReload adds a version in a Caddy reload; @latest
// calls it at once, and the bare id keeps calling the published one.
func TestPromptCompletionsReload(t *testing.T) {
	s, up, _ := newPromptCompletionSite(t)
	s.writePrompt(t, "grow.json", `{"name":"Grow","published":1,"versions":[
		{"messages":[{"role":"user","content":"one {{q}}"}],"model":"m1","virtual_key":"vk-prompt"}]}`)
	s.load(t)
	settleReload()
	call(t, "POST", "/prompts/grow@latest/completions", `{"variables":{"q":"a"}}`, 200, nil)
	if sent := lastSent(t, up); messagesOf(sent) != "user:one a" {
		t.Fatalf("before reload: %+v", sent)
	}
	s.writePrompt(t, "grow.json", `{"name":"Grow","published":1,"versions":[
		{"messages":[{"role":"user","content":"one {{q}}"}],"model":"m1","virtual_key":"vk-prompt"},
		{"messages":[{"role":"user","content":"two {{q}}"}],"model":"m2","virtual_key":"vk-prompt"}]}`)
	s.load(t)
	settleReload()
	call(t, "POST", "/prompts/grow@latest/completions", `{"variables":{"q":"a"}}`, 200, nil)
	if sent := lastSent(t, up); messagesOf(sent) != "user:two a" || sent.Model != "m2" {
		t.Fatalf("@latest after reload: %+v", sent)
	}
	call(t, "POST", "/prompts/grow/completions", `{"variables":{"q":"a"}}`, 200, nil)
	if sent := lastSent(t, up); messagesOf(sent) != "user:one a" {
		t.Fatalf("published after reload: %+v", sent)
	}
}
