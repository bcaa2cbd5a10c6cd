package prompts

import (
	"context"
	"errors"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestParseRef(t *testing.T) {
	cases := []struct {
		ref, name string
		sel       Selector
		bad       bool
	}{
		{ref: "support-reply", name: "support-reply"},
		{ref: "3f1c8c9e-0d8a-4c1e-9b7a-2d4f6a8b0c1d", name: "3f1c8c9e-0d8a-4c1e-9b7a-2d4f6a8b0c1d"},
		{ref: "support-reply@latest", name: "support-reply", sel: Selector{Latest: true}},
		{ref: "support-reply@1", name: "support-reply", sel: Selector{Number: 1}},
		{ref: "support-reply@12", name: "support-reply", sel: Selector{Number: 12}},
		{ref: "support-reply@007", name: "support-reply", sel: Selector{Number: 7}},
		{ref: "support-reply@", bad: true},
		{ref: "support-reply@0", bad: true},
		{ref: "support-reply@-1", bad: true},
		{ref: "support-reply@+1", bad: true},
		{ref: "support-reply@1.5", bad: true},
		{ref: "support-reply@ 1", bad: true},
		{ref: "support-reply@Latest", bad: true},
		{ref: "support-reply@production", bad: true},
		{ref: "support-reply@1@2", bad: true},
		{ref: "support-reply@9999999999", bad: true},
		{ref: "@latest", bad: true},
		{ref: "", bad: true},
	}
	for _, c := range cases {
		t.Run(c.ref, func(t *testing.T) {
			name, sel, err := ParseRef(c.ref)
			if c.bad {
				var ae *apierror.Error
				if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "promptId" {
					t.Fatalf("want a 400 on promptId, got %v", err)
				}
				return
			}
			if err != nil || name != c.name || sel != c.sel {
				t.Fatalf("got %q %+v %v", name, sel, err)
			}
		})
	}
}

func TestResolveSuffixes(t *testing.T) {
	published := testPrompt(t, "pub", 2, "v1", "v2", "v3")
	draft := testPrompt(t, "draft", 0, "d1")
	reg, err := NewRegistry([]*Prompt{published, draft}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ref     string
		version int
		status  int
		code    string
	}{
		{ref: "pub", version: 2},
		{ref: published.ID, version: 2},
		{ref: "pub@latest", version: 3},
		{ref: published.ID + "@latest", version: 3},
		{ref: "pub@1", version: 1},
		{ref: "pub@3", version: 3},
		{ref: "pub@4", status: 404, code: "prompt_version_not_found"},
		{ref: "pub@x", status: 400, code: "invalid_prompt_version"},
		{ref: "draft", status: 404, code: "prompt_not_published"},
		{ref: "draft@latest", version: 1},
		{ref: "draft@1", version: 1},
		{ref: "nope", status: 404, code: "prompt_not_found"},
		{ref: "nope@1", status: 404, code: "prompt_not_found"},
	}
	for _, c := range cases {
		t.Run(c.ref, func(t *testing.T) {
			_, v, err := Resolve(context.Background(), reg, "ws", c.ref)
			if c.status != 0 {
				var ae *apierror.Error
				if !errors.As(err, &ae) || ae.Status != c.status || ae.Code != c.code {
					t.Fatalf("want %d %s, got %v", c.status, c.code, err)
				}
				return
			}
			if err != nil || v.Number != c.version {
				t.Fatalf("got %+v %v", v, err)
			}
		})
	}
}

// testPrompt builds a valid file-like prompt whose version i has content
// contents[i].
func testPrompt(t testing.TB, slug string, published int, contents ...string) *Prompt {
	t.Helper()
	p := &Prompt{ID: deriveID("test", slug), Slug: slug, Name: slug, Published: published, File: slug + ".json"}
	for _, c := range contents {
		p.Versions = append(p.Versions, &Version{Messages: []Message{{Role: "user", Content: mustMarshal(c)}}})
	}
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompletionsRef(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/prompts/greet/completions":        "greet",
		"/v1/prompts/greet@latest/completions": "greet@latest",
		"/v1/prompts//completions":             "",
		"/v1/prompts/greet/render":             "",
		"/v1/prompts/a/b/completions":          "",
		"/v1/chat/completions":                 "",
		"/v1/prompts/greet/completions/extra":  "",
	} {
		got, ok := CompletionsRef(path)
		if got != want || ok != (want != "") {
			t.Errorf("CompletionsRef(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
}
