package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const greetV1 = `{
  "name": "Greeter",
  "published": 1,
  "versions": [
    {"messages": [{"role": "system", "content": "You greet {{name}}."}], "model": "gpt-4o-mini",
     "hyperparameters": {"temperature": 0.1}}
  ]
}`

const greetV2 = `{
  "name": "Greeter",
  "published": 1,
  "versions": [
    {"messages": [{"role": "system", "content": "You greet {{name}}."}], "model": "gpt-4o-mini",
     "hyperparameters": {"temperature": 0.1}},
    {"messages": [{"role": "system", "content": "You greet {{name}} warmly."}], "model": "gpt-4o",
     "description": "warmer"}
  ]
}`

func TestPromptFilesLoadAndReload(t *testing.T) {
	s := newPromptSite(t, "")
	s.writePrompt(t, "greeter.json", greetV1)
	s.writePrompt(t, "README.md", "not a prompt: ignored")
	s.load(t)

	var r rendered
	call(t, "POST", "/prompts/greeter/render", `{"variables":{"name":"Ada"}}`, 200, &r)
	if !r.Success || r.Data.Messages[0].Content != "You greet Ada." || r.Data.Model != "gpt-4o-mini" || *r.Data.Temperature != 0.1 {
		t.Fatalf("render %+v", r)
	}
	call(t, "POST", "/prompts/greeter@2/render", `{"variables":{"name":"Ada"}}`, 404, nil)

	// A reload that adds a version: the new version is there, the published
	// one is unchanged.
	s.writePrompt(t, "greeter.json", greetV2)
	s.load(t)
	r = rendered{}
	call(t, "POST", "/prompts/greeter@latest/render", `{"variables":{"name":"Ada"}}`, 200, &r)
	if r.Data.Messages[0].Content != "You greet Ada warmly." || r.Data.Model != "gpt-4o" || r.Data.Temperature != nil {
		t.Fatalf("@latest after reload %+v", r)
	}
	call(t, "POST", "/prompts/greeter/render", `{"variables":{"name":"Ada"}}`, 200, &r)
	if r.Data.Messages[0].Content != "You greet Ada." {
		t.Fatalf("published after reload %+v", r)
	}

	// The file prompt is listed, has the same id on every load, and is
	// read-only through the API.
	var list struct {
		Total int `json:"total"`
		Data  []struct {
			ID, Slug, Source string
			LatestVersion    int `json:"latest_version"`
		} `json:"data"`
	}
	call(t, "GET", "/prompts", "", 200, &list)
	if list.Total != 1 || list.Data[0].Slug != "greeter" || list.Data[0].Source != "file" || list.Data[0].LatestVersion != 2 {
		t.Fatalf("list %+v", list)
	}
	id := list.Data[0].ID
	s.load(t)
	call(t, "GET", "/prompts", "", 200, &list)
	if list.Data[0].ID != id {
		t.Fatal("a file prompt's id changed across reloads")
	}
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/prompts/greeter", `{"string":"[{\"role\":\"user\",\"content\":\"x\"}]"}`},
		{"PUT", "/prompts/" + id + "/makeDefault", `{"version":2}`},
		{"PUT", "/prompts/greeter/versions/1", `{"label_id":"x"}`},
		{"DELETE", "/prompts/greeter", ""},
	} {
		e := callErr(t, w.method, w.path, w.body, 409)
		if e.Error.Code != "prompt_read_only" || !strings.Contains(e.Error.Message, "greeter.json") {
			t.Fatalf("%s %s: %+v", w.method, w.path, e)
		}
	}
	// A file's workspace_id limits who sees it.
	s.writePrompt(t, "other.json", `{"name":"Other","workspace_id":"00000000-0000-4000-8000-000000000001","published":1,
		"versions":[{"messages":[{"role":"user","content":"hi"}]}]}`)
	s.load(t)
	callErr(t, "GET", "/prompts/other", "", 404)
}

func TestPromptFileInvalidFailsLoad(t *testing.T) {
	cases := []struct {
		name, content string
		want          []string
	}{
		{"bad-role.json", `{"name":"x","versions":[{"messages":[{"role":"robot","content":"hi"}]}]}`,
			[]string{"bad-role.json", "versions[0].messages[0].role"}},
		{"bad-template.json", `{"name":"x","versions":[{"messages":[{"role":"user","content":"{{#open}} never closed"}]}]}`,
			[]string{"bad-template.json", "versions[0].messages[0].content"}},
		{"partial.json", `{"name":"x","versions":[{"messages":[{"role":"user","content":"{{> /etc/passwd}}"}]}]}`,
			[]string{"partial.json", "partials are not supported"}},
		{"unknown.json", `{"name":"x","verions":[]}`, []string{"unknown.json", `"verions"`}},
		{"published.json", `{"name":"x","published":3,"versions":[{"messages":[{"role":"user","content":"hi"}]}]}`,
			[]string{"published.json", "published"}},
		{"secret.json", `{"name":"x","versions":[{"messages":[{"role":"user","content":"hi"}],"provider":"openai","provider_settings":{"api_key":"sk-x"}}]}`,
			[]string{"secret.json", "provider_settings.api_key"}},
		{"vk.json", `{"name":"x","versions":[{"messages":[{"role":"user","content":"hi"}],"virtual_key":"nope"}]}`,
			[]string{"vk.json", "virtual_key", `"nope"`}},
		{"syntax.json", "{\"name\":\"x\",\n\"versions\": [,]}", []string{"syntax.json", "line 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newPromptSite(t, "")
			s.writePrompt(t, c.name, c.content)
			err := s.tryLoad()
			if err == nil {
				t.Fatal("the config loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not name %q", err, w)
				}
			}
		})
	}
	// A missing directory fails the load too.
	s := newPromptSite(t, "")
	s.PromptDir = filepath.Join(s.PromptDir, "missing")
	if err := s.tryLoad(); err == nil || !strings.Contains(err.Error(), "prompts directory") {
		t.Fatalf("missing directory: %v", err)
	}
}

func TestPromptExamplesLoad(t *testing.T) {
	s := newPromptSite(t, "")
	for _, name := range []string{"support-reply.json", "extract-order.json"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", "prompts", name))
		if err != nil {
			t.Fatal(err)
		}
		s.writePrompt(t, name, string(b))
	}
	s.load(t)
	var r rendered
	call(t, "POST", "/prompts/support-reply/render",
		`{"variables":{"company":"Acme","max_sentences":3,"question":"Where is my parcel?","customer":{"name":"Ada","vip":true}}}`, 200, &r)
	if got := r.Data.Messages[0].Content; got != "You are the support assistant of Acme. Answer in at most 3 sentences. The customer is a VIP: offer a call back." {
		t.Fatalf("system %q", got)
	}
	if r.Data.Messages[1].Content != "Ada asks: Where is my parcel?" {
		t.Fatalf("user %q", r.Data.Messages[1].Content)
	}
	call(t, "POST", "/prompts/extract-order/render",
		`{"variables":{"email":"2 x blue mug","products":[{"sku":"M-1","title":"blue mug"},{"sku":"M-2","title":"red mug"}]}}`, 200, &r)
	if got := r.Data.Messages[0].Content; got != "Extract the order from the email. Known products:\n- M-1: blue mug\n- M-2: red mug." {
		t.Fatalf("extract-order system %q", got)
	}
}
