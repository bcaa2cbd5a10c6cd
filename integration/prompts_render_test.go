package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

const renderPrompt = `{
  "name": "Render me",
  "published": 1,
  "versions": [
    {"messages": [{"role": "system", "content": "v1 for {{user.name}} <b>&</b>"}, {"role": "user", "content": "{{question}}"}],
     "model": "gpt-4o-mini", "hyperparameters": {"temperature": 0.3, "max_tokens": 100}},
    {"messages": [{"role": "user", "content": "v2 {{question}}"}], "model": "gpt-4o"}
  ]
}`

func TestPromptRender(t *testing.T) {
	s := newPromptSite(t, "")
	s.writePrompt(t, "render-me.json", renderPrompt)
	s.writePrompt(t, "draft.json", `{"name":"Draft","versions":[{"messages":[{"role":"user","content":"{{x}}"}]}]}`)
	s.load(t)
	vars := `"variables":{"user":{"name":"Ada"},"question":"Why?"}`

	var r rendered
	call(t, "POST", "/prompts/render-me/render", `{`+vars+`}`, 200, &r)
	if !r.Success || len(r.Data.Messages) != 2 || r.Data.Messages[0].Content != "v1 for Ada <b>&</b>" ||
		r.Data.Model != "gpt-4o-mini" || *r.Data.Temperature != 0.3 || *r.Data.MaxTokens != 100 || r.Data.Stream != nil {
		t.Fatalf("bare: %+v", r)
	}
	r = rendered{}
	call(t, "POST", "/prompts/render-me@latest/render", `{`+vars+`,"stream":true}`, 200, &r)
	if r.Data.Messages[0].Content != "v2 Why?" || r.Data.Model != "gpt-4o" || !*r.Data.Stream {
		t.Fatalf("@latest: %+v", r)
	}
	r = rendered{}
	call(t, "POST", "/prompts/render-me@1/render", `{`+vars+`,"temperature":0.9,"max_tokens":null}`, 200, &r)
	if *r.Data.Temperature != 0.9 || *r.Data.MaxTokens != 100 {
		t.Fatalf("@1 with overrides (request wins, null ignored): %+v", r)
	}
	// A file prompt is also found by its id.
	var p promptRecord
	call(t, "GET", "/prompts/render-me", "", 200, &p)
	call(t, "POST", "/prompts/"+p.ID+"@2/render", `{`+vars+`}`, 200, nil)

	cases := []struct {
		name, ref, body string
		status          int
		param, code     string
	}{
		{"unpublished bare", "draft", `{"variables":{"x":1}}`, 404, "", "prompt_not_published"},
		{"unknown prompt", "nope", `{"variables":{}}`, 404, "", "prompt_not_found"},
		{"unknown version", "render-me@3", `{` + vars + `}`, 404, "", "prompt_version_not_found"},
		{"bad suffix label", "render-me@production", `{` + vars + `}`, 400, "promptId", "invalid_prompt_version"},
		{"bad suffix zero", "render-me@0", `{` + vars + `}`, 400, "promptId", "invalid_prompt_version"},
		{"bad suffix empty", "render-me@", `{` + vars + `}`, 400, "promptId", "invalid_prompt_version"},
		{"missing variable", "render-me", `{"variables":{"user":{"name":"Ada"}}}`, 400, "variables.question", "missing_variable"},
		{"missing nested variable", "render-me", `{"variables":{"user":{},"question":"q"}}`, 400, "variables.user.name", "missing_variable"},
		{"no variables", "render-me", `{"temperature":1}`, 400, "variables", ""},
		{"variables not an object", "render-me", `{"variables":[1]}`, 400, "variables", ""},
		{"nested hyperparameters", "render-me", `{` + vars + `,"hyperparameters":{"temperature":1}}`, 400, "hyperparameters", ""},
		{"messages in body", "render-me", `{` + vars + `,"messages":[]}`, 400, "messages", ""},
		{"not JSON", "render-me", `variables`, 400, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := callErr(t, "POST", "/prompts/"+c.ref+"/render", c.body, c.status)
			if e.Error.Param != c.param || (c.code != "" && e.Error.Code != c.code) {
				t.Fatalf("param %q code %q, want %q %q: %s", e.Error.Param, e.Error.Code, c.param, c.code, e.Error.Message)
			}
		})
	}
	e := callErr(t, "POST", "/prompts/draft/render", `{"variables":{"x":1}}`, 404)
	if !strings.Contains(e.Error.Message, "no published version") {
		t.Fatalf("unpublished message: %s", e.Error.Message)
	}
}

// TestPromptRenderToChatCompletions sends a render's data unchanged to
// /v1/chat/completions against the fake OpenAI provider.
func TestPromptRenderToChatCompletions(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newPromptSite(t, "")
	s.writePrompt(t, "render-me.json", renderPrompt)
	s.load(t)
	raw := call(t, "POST", "/prompts/render-me/render", `{"variables":{"user":{"name":"Ada"},"question":"Why?"},"seed":7}`, 200, nil)
	var env struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || !env.Success {
		t.Fatalf("render: %s", raw)
	}
	var completion struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	call(t, "POST", "/chat/completions", string(env.Data), 200, &completion,
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if completion.Object != "chat.completion" || len(completion.Choices) == 0 {
		t.Fatalf("completion: %+v", completion)
	}
	var sent map[string]any
	if err := json.Unmarshal(up.last().Body, &sent); err != nil {
		t.Fatal(err)
	}
	msgs, _ := sent["messages"].([]any)
	if sent["model"] != "gpt-4o-mini" || sent["temperature"] != 0.3 || sent["seed"] != float64(7) || len(msgs) != 2 ||
		msgs[0].(map[string]any)["content"] != "v1 for Ada <b>&</b>" {
		t.Fatalf("the provider got %s", up.last().Body)
	}
}
