package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// promptRecord is the flat prompt object of GET /prompts/{id}.
type promptRecord struct {
	ID                       string          `json:"id"`
	Slug                     string          `json:"slug"`
	Name                     string          `json:"name"`
	CollectionID             string          `json:"collection_id"`
	WorkspaceID              string          `json:"workspace_id"`
	String                   string          `json:"string"`
	Parameters               map[string]any  `json:"parameters"`
	PromptVersion            int             `json:"prompt_version"`
	PromptVersionID          string          `json:"prompt_version_id"`
	PromptVersionDescription string          `json:"prompt_version_description"`
	PromptVersionLabelID     *string         `json:"prompt_version_label_id"`
	VirtualKey               *string         `json:"virtual_key"`
	Model                    string          `json:"model"`
	Tools                    json.RawMessage `json:"tools"`
	ToolChoice               json.RawMessage `json:"tool_choice"`
	TemplateMetadata         map[string]any  `json:"template_metadata"`
	Object                   string          `json:"object"`
	PublishedVersion         *int            `json:"published_version"`
	LatestVersion            int             `json:"latest_version"`
	Source                   string          `json:"source"`
}

// TestPromptAPIWithSDKShapes drives every management route with the exact
// requests the portkey-ai SDK 3.1.0 sends (captured on the wire from
// prompts.create/list/retrieve/update/publish/delete, prompts.versions.*
// and prompts.render), through the x-portkey-* header aliases it uses.
func TestPromptAPIWithSDKShapes(t *testing.T) {
	s := newPromptSite(t, `
		virtual_key openai-vk {
			provider openai
			api_key sk-unused
		}`)
	s.load(t)
	pk := []string{"x-portkey-api-key", gatewayKey, "x-gateway-api-key", ""}

	// prompts.create
	var created struct {
		ID, Slug, Object string
		VersionID        string `json:"version_id"`
	}
	raw := call(t, "POST", "/prompts", `{"name":"Support Reply","collection_id":"c1","string":"[{\"role\":\"system\",\"content\":\"Hi {{name}}\"}]","parameters":{"temperature":0.2,"model":"gpt-4o-mini"},"virtual_key":"openai-vk","model":"gpt-4o-mini","version_description":"v1","template_metadata":{"team":"x"}}`, 200, &created, pk...)
	if created.Slug != "support-reply" || created.Object != "prompt" || created.ID == "" || created.VersionID == "" {
		t.Fatalf("create: %s", raw)
	}

	// prompts.list, with and without the SDK's query.
	var list struct {
		Object string
		Total  int
		Data   []struct{ ID, Slug, Object string }
	}
	call(t, "GET", "/prompts?collection_id=c1&current_page=0&page_size=10", "", 200, &list, pk...)
	if list.Object != "list" || list.Total != 1 || list.Data[0].ID != created.ID || list.Data[0].Object != "prompt" {
		t.Fatalf("list: %+v", list)
	}
	call(t, "GET", "/prompts?collection_id=other", "", 200, &list, pk...)
	if list.Total != 0 || len(list.Data) != 0 {
		t.Fatalf("collection filter: %+v", list)
	}

	// prompts.retrieve, by slug and by id.
	var p promptRecord
	call(t, "GET", "/prompts/support-reply", "", 200, &p, pk...)
	if p.ID != created.ID || p.PromptVersion != 1 || p.PromptVersionID != created.VersionID || p.Model != "gpt-4o-mini" ||
		p.Parameters["temperature"] != 0.2 || p.Parameters["model"] != "gpt-4o-mini" || *p.VirtualKey != "openai-vk" ||
		p.TemplateMetadata["team"] != "x" || p.PromptVersionDescription != "v1" || *p.PublishedVersion != 1 || p.Source != "api" ||
		p.String != `[{"role":"system","content":"Hi {{name}}"}]` || p.CollectionID != "c1" {
		t.Fatalf("retrieve: %+v", p)
	}
	call(t, "GET", "/prompts/"+created.ID, "", 200, &p, pk...)

	// prompts.update: a partial body makes version 2 from version 1.
	var updated struct {
		ID, Slug        string
		PromptVersionID string `json:"prompt_version_id"`
	}
	call(t, "PUT", "/prompts/support-reply", `{"string":"[{\"role\":\"system\",\"content\":\"Hello {{name}}\"}]","version_description":"v2"}`, 200, &updated, pk...)
	if updated.ID != created.ID || updated.PromptVersionID == "" || updated.PromptVersionID == created.VersionID {
		t.Fatalf("update: %+v", updated)
	}
	// The published version is still 1 until makeDefault.
	call(t, "GET", "/prompts/support-reply", "", 200, &p, pk...)
	if p.PromptVersion != 1 {
		t.Fatalf("update published the new version: %+v", p)
	}

	// prompts.publish
	call(t, "PUT", "/prompts/support-reply/makeDefault", `{"version":2}`, 200, nil, pk...)
	p = promptRecord{}
	call(t, "GET", "/prompts/support-reply", "", 200, &p, pk...)
	if p.PromptVersion != 2 || p.PromptVersionID != updated.PromptVersionID || p.Model != "gpt-4o-mini" || *p.VirtualKey != "openai-vk" || p.Parameters["temperature"] != 0.2 {
		t.Fatalf("after publish (fields not given to update are kept): %+v", p)
	}

	// prompts.versions.list / retrieve / update
	var versions struct {
		Total int
		Data  []struct {
			ID             string
			PromptID       string `json:"prompt_id"`
			PromptVersion  int    `json:"prompt_version"`
			PromptTemplate string `json:"prompt_template"`
			Published      bool
		}
	}
	call(t, "GET", "/prompts/support-reply/versions", "", 200, &versions, pk...)
	if versions.Total != 2 || versions.Data[0].PromptVersion != 1 || versions.Data[1].ID != updated.PromptVersionID ||
		!versions.Data[1].Published || versions.Data[0].PromptID != created.ID || !strings.Contains(versions.Data[0].PromptTemplate, "Hi {{name}}") {
		t.Fatalf("versions: %+v", versions)
	}
	p = promptRecord{}
	call(t, "GET", "/prompts/support-reply/versions/"+created.VersionID, "", 200, &p, pk...)
	if p.PromptVersion != 1 || !strings.Contains(p.String, "Hi {{name}}") {
		t.Fatalf("version 1: %+v", p)
	}
	call(t, "PUT", "/prompts/support-reply/versions/"+created.VersionID, `{"label_id":"lab"}`, 200, nil, pk...)
	call(t, "GET", "/prompts/support-reply/versions/1", "", 200, &p, pk...)
	if p.PromptVersionLabelID == nil || *p.PromptVersionLabelID != "lab" || !strings.Contains(p.String, "Hi {{name}}") {
		t.Fatalf("version 1 after label: %+v", p)
	}

	// prompts.render keeps prompt_id in the body; it is tolerated.
	var r rendered
	call(t, "POST", "/prompts/support-reply@1/render", `{"prompt_id":"support-reply@1","variables":{"name":"A"},"temperature":0.5,"max_tokens":20}`, 200, &r, pk...)
	if r.Data.Messages[0].Content != "Hi A" || *r.Data.Temperature != 0.5 || *r.Data.MaxTokens != 20 || r.Data.Model != "gpt-4o-mini" {
		t.Fatalf("render: %+v", r)
	}

	// prompts.delete
	call(t, "DELETE", "/prompts/support-reply", "", 200, nil, pk...)
	callErr(t, "GET", "/prompts/support-reply", "", 404, pk...)
}

func TestPromptAPIRules(t *testing.T) {
	s := newPromptSite(t, "")
	s.load(t)
	create := func(name string) (id, slug string) {
		var out struct{ ID, Slug string }
		call(t, "POST", "/prompts", `{"name":`+jsonString(name)+`,"string":"[{\"role\":\"user\",\"content\":\"{{q}}\"}]"}`, 200, &out)
		return out.ID, out.Slug
	}
	// Slugs come from names and stay unique in the workspace.
	_, s1 := create("Weekly Report!")
	_, s2 := create("weekly report")
	if s1 != "weekly-report" || s2 != "weekly-report-2" {
		t.Fatalf("slugs %q %q", s1, s2)
	}

	cases := []struct {
		name, method, path, body string
		status                   int
		param, code              string
	}{
		{"create without name", "POST", "/prompts", `{"string":"[]"}`, 400, "name", ""},
		{"create without string", "POST", "/prompts", `{"name":"x"}`, 400, "string", ""},
		{"string not messages", "POST", "/prompts", `{"name":"x","string":"Hello {{x}}"}`, 400, "string", ""},
		{"bad role", "POST", "/prompts", `{"name":"x","string":"[{\"role\":\"boss\",\"content\":\"x\"}]"}`, 400, "messages[0].role", ""},
		{"bad template", "POST", "/prompts", `{"name":"x","string":"[{\"role\":\"user\",\"content\":\"{{#a}}\"}]"}`, 400, "messages[0].content", ""},
		{"partial refused", "POST", "/prompts", `{"name":"x","string":"[{\"role\":\"user\",\"content\":\"{{> secrets}}\"}]"}`, 400, "messages[0].content", ""},
		{"unknown virtual key", "POST", "/prompts", `{"name":"x","string":"[{\"role\":\"user\",\"content\":\"x\"}]","virtual_key":"nope"}`, 400, "virtual_key", ""},
		{"secret in provider settings", "POST", "/prompts", `{"name":"x","string":"[{\"role\":\"user\",\"content\":\"x\"}]","provider":"openai","provider_settings":{"api_key":"sk"}}`, 400, "provider_settings.api_key", ""},
		{"other workspace", "POST", "/prompts", `{"name":"x","workspace_id":"00000000-0000-4000-8000-000000000009","string":"[{\"role\":\"user\",\"content\":\"x\"}]"}`, 403, "", "workspace_forbidden"},
		{"unknown prompt", "GET", "/prompts/nope", "", 404, "", "prompt_not_found"},
		{"unknown version", "GET", "/prompts/weekly-report/versions/7", "", 404, "", "prompt_version_not_found"},
		{"publish missing version", "PUT", "/prompts/weekly-report/makeDefault", `{"version":9}`, 404, "", "prompt_version_not_found"},
		{"publish without version", "PUT", "/prompts/weekly-report/makeDefault", `{}`, 400, "version", ""},
		{"version template immutable", "PUT", "/prompts/weekly-report/versions/1", `{"string":"[]"}`, 400, "string", ""},
		{"delete unknown", "DELETE", "/prompts/nope", "", 404, "", "prompt_not_found"},
		{"wrong method", "PATCH", "/prompts/weekly-report", `{}`, 405, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := callErr(t, c.method, c.path, c.body, c.status)
			if c.param != "" && e.Error.Param != c.param {
				t.Fatalf("param %q, want %q: %s", e.Error.Param, c.param, e.Error.Message)
			}
			if c.code != "" && e.Error.Code != c.code {
				t.Fatalf("code %q, want %q: %s", e.Error.Code, c.code, e.Error.Message)
			}
		})
	}

	// Version metadata changes; the template does not.
	call(t, "PUT", "/prompts/weekly-report/versions/1", `{"description":"first","template_metadata":{"a":1}}`, 200, nil)
	var p promptRecord
	call(t, "GET", "/prompts/weekly-report", "", 200, &p)
	if p.PromptVersionDescription != "first" || p.TemplateMetadata["a"] != float64(1) || !strings.Contains(p.String, "{{q}}") {
		t.Fatalf("version metadata: %+v", p)
	}
	// Renaming keeps the slug and adds no version.
	call(t, "PUT", "/prompts/weekly-report", `{"name":"Weekly"}`, 200, nil)
	call(t, "GET", "/prompts/weekly-report", "", 200, &p)
	if p.Name != "Weekly" || p.LatestVersion != 1 {
		t.Fatalf("rename: %+v", p)
	}
	// Pagination counts pages from 0.
	var list struct {
		Total int
		Data  []struct{ Slug string }
	}
	call(t, "GET", "/prompts?page_size=1&current_page=1", "", 200, &list)
	if list.Total != 2 || len(list.Data) != 1 || list.Data[0].Slug != "weekly-report-2" {
		t.Fatalf("page: %+v", list)
	}
	call(t, "GET", "/prompts?search=REPORT-2", "", 200, &list)
	if list.Total != 1 {
		t.Fatalf("search: %+v", list)
	}
	// API prompts survive a reload (they live in Caddy's storage).
	s.load(t)
	call(t, "GET", "/prompts/weekly-report-2", "", 200, nil)
}

// TestPromptWorkspaces checks that a key sees only its workspace's prompts.
func TestPromptWorkspaces(t *testing.T) {
	s := newPromptSite(t, `
		api_key other other-key-0123456789`)
	s.load(t)
	var out struct{ ID string }
	call(t, "POST", "/prompts", `{"name":"Mine","string":"[{\"role\":\"user\",\"content\":\"x\"}]"}`, 200, &out)
	other := []string{"x-gateway-api-key", "other-key-0123456789"}
	callErr(t, "GET", "/prompts/mine", "", 404, other...)
	callErr(t, "GET", "/prompts/"+out.ID, "", 404, other...)
	callErr(t, "POST", "/prompts/mine/render", `{"variables":{}}`, 404, other...)
	callErr(t, "DELETE", "/prompts/"+out.ID, "", 404, other...)
	var list struct{ Total int }
	call(t, "GET", "/prompts", "", 200, &list, other...)
	if list.Total != 0 {
		t.Fatalf("the other workspace lists %d prompts", list.Total)
	}
	// Both workspaces may use the same slug.
	var second struct{ Slug string }
	call(t, "POST", "/prompts", `{"name":"Mine","string":"[{\"role\":\"user\",\"content\":\"y\"}]"}`, 200, &second, other...)
	if second.Slug != "mine" {
		t.Fatalf("slug in the other workspace: %q", second.Slug)
	}
}
