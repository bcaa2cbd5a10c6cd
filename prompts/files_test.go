package prompts

import (
	"strings"
	"testing"
	"time"
)

func TestParseFile(t *testing.T) {
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const msgs = `"messages":[{"role":"user","content":"{{x}}"}]`
	cases := []struct {
		name, content string
		err           string // substring of the error; "" for valid
	}{
		{"minimal", `{"name":"A b","versions":[{` + msgs + `}]}`, ""},
		{"full", `{"id":"3f1c8c9e-0d8a-4c1e-9b7a-2d4f6a8b0c1d","name":"A","slug":"a-1","collection_id":"c","workspace_id":"00000000-0000-4000-8000-00000000000a","published":2,
			"versions":[{` + msgs + `,"model":"m","virtual_key":"vk","hyperparameters":{"temperature":0.1},"template_metadata":{"k":1},"created_at":"2025-01-01T00:00:00Z"},
			{` + msgs + `,"provider":"openai","provider_settings":{"custom_host":"http://h"},"description":"d","label_id":"l"}]}`, ""},
		{"no name", `{"versions":[{` + msgs + `}]}`, "name: is required"},
		{"bad slug", `{"name":"a","slug":"Not A Slug","versions":[{` + msgs + `}]}`, "slug:"},
		{"bad id", `{"id":"x","name":"a","versions":[{` + msgs + `}]}`, "id: must be a UUID"},
		{"bad workspace", `{"name":"a","workspace_id":"ws","versions":[{` + msgs + `}]}`, "workspace_id: must be a UUID"},
		{"no versions", `{"name":"a","versions":[]}`, "versions: at least one version"},
		{"no messages", `{"name":"a","versions":[{"model":"m"}]}`, "versions[0].messages: at least one message"},
		{"unknown field", `{"name":"a","version":[]}`, `unknown field "version"`},
		{"unknown version field", `{"name":"a","versions":[{` + msgs + `,"temprature":1}]}`, `unknown field "temprature"`},
		{"wrong type", `{"name":"a","versions":[{` + msgs + `,"model":5}]}`, "versions.model: must be a string"},
		{"published out of range", `{"name":"a","published":2,"versions":[{` + msgs + `}]}`, "published: version 2 does not exist"},
		{"two targets", `{"name":"a","versions":[{` + msgs + `,"virtual_key":"v","config_id":"c"}]}`, "versions[0].virtual_key: give at most one"},
		{"settings without provider", `{"name":"a","versions":[{` + msgs + `,"provider_settings":{"custom_host":"h"}}]}`, "versions[0].provider_settings: needs provider"},
		{"secret setting", `{"name":"a","versions":[{` + msgs + `,"provider":"openai","provider_settings":{"clouda_secret_access_key":"s"}}]}`, "provider_settings.clouda_secret_access_key"},
		{"model as hyperparameter", `{"name":"a","versions":[{` + msgs + `,"hyperparameters":{"model":"m"}}]}`, "versions[0].hyperparameters.model"},
		{"messages as hyperparameter", `{"name":"a","versions":[{` + msgs + `,"hyperparameters":{"messages":[]}}]}`, "versions[0].hyperparameters.messages"},
		{"metadata not an object", `{"name":"a","versions":[{` + msgs + `,"template_metadata":[1]}]}`, "versions[0].template_metadata"},
		{"bad role", `{"name":"a","versions":[{"messages":[{"role":"","content":"x"}]}]}`, "versions[0].messages[0].role"},
		{"content not text", `{"name":"a","versions":[{"messages":[{"role":"user","content":5}]}]}`, "versions[0].messages[0].content"},
		{"bad template in second version", `{"name":"a","versions":[{` + msgs + `},{"messages":[{"role":"user","content":"{{/x}}"}]}]}`, "versions[1].messages[0].content"},
		{"syntax", "{\n\"name\": \"a\",\n}", "line 3"},
		{"empty", ``, "empty or truncated"},
		{"two objects", `{"name":"a","versions":[{` + msgs + `}]} {}`, "more than one JSON value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := parseFile([]byte(c.content), "f.json", mod)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if p.File != "f.json" || p.ID == "" || p.Versions[0].ID == "" || p.CreatedAt != mod {
					t.Fatalf("parsed %+v", p)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want it to contain %q", err, c.err)
			}
		})
	}
}

func TestFileIDsAreStable(t *testing.T) {
	const content = `{"name":"Stable","versions":[{"messages":[{"role":"user","content":"x"}]},{"messages":[{"role":"user","content":"y"}]}]}`
	a, err := parseFile([]byte(content), "a.json", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := parseFile([]byte(content), "a.json", time.Now().Add(time.Hour))
	if a.ID != b.ID || a.Versions[1].ID != b.Versions[1].ID || a.Versions[0].ID == a.Versions[1].ID {
		t.Fatal("derived ids are not stable per slug and version")
	}
}
