package promptapi

import (
	"encoding/json"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// promptView is a prompt with one version's fields flattened in, the shape
// Portkey's GET /prompts/{id} and GET /prompts/{id}/versions/{versionId}
// answer. The last group of fields is the gateway's own addition.
type promptView struct {
	ID                       string                     `json:"id"`
	Slug                     string                     `json:"slug"`
	Name                     string                     `json:"name"`
	CollectionID             string                     `json:"collection_id"`
	WorkspaceID              string                     `json:"workspace_id"`
	String                   string                     `json:"string"`
	Parameters               map[string]json.RawMessage `json:"parameters"`
	PromptVersion            int                        `json:"prompt_version"`
	PromptVersionID          string                     `json:"prompt_version_id"`
	PromptVersionStatus      string                     `json:"prompt_version_status"`
	PromptVersionDescription string                     `json:"prompt_version_description"`
	PromptVersionLabelID     *string                    `json:"prompt_version_label_id"`
	VirtualKey               *string                    `json:"virtual_key"`
	Model                    string                     `json:"model"`
	Functions                json.RawMessage            `json:"functions"`
	Tools                    json.RawMessage            `json:"tools"`
	ToolChoice               json.RawMessage            `json:"tool_choice"`
	TemplateMetadata         json.RawMessage            `json:"template_metadata"`
	IsRawTemplate            bool                       `json:"is_raw_template"`
	Status                   string                     `json:"status"`
	CreatedAt                time.Time                  `json:"created_at"`
	LastUpdatedAt            time.Time                  `json:"last_updated_at"`
	Object                   string                     `json:"object"`

	Messages         []prompts.Message          `json:"messages"`
	ConfigID         *string                    `json:"config_id"`
	Provider         *string                    `json:"provider"`
	ProviderSettings map[string]json.RawMessage `json:"provider_settings,omitempty"`
	PublishedVersion *int                       `json:"published_version"`
	LatestVersion    int                        `json:"latest_version"`
	Source           string                     `json:"source"`
}

func viewPrompt(p *prompts.Prompt, v *prompts.Version) *promptView {
	hp := v.Hyperparameters
	params := make(map[string]json.RawMessage, len(hp)+1)
	for k, raw := range hp {
		params[k] = raw
	}
	if v.Model != "" {
		params["model"], _ = json.Marshal(v.Model)
	}
	tmpl, _ := json.Marshal(v.Messages)
	return &promptView{
		ID: p.ID, Slug: p.Slug, Name: p.Name, CollectionID: p.CollectionID, WorkspaceID: p.WorkspaceID,
		String: string(tmpl), Parameters: params,
		PromptVersion: v.Number, PromptVersionID: v.ID, PromptVersionStatus: "active",
		PromptVersionDescription: v.Description, PromptVersionLabelID: optional(v.LabelID),
		VirtualKey: optional(v.VirtualKey), Model: v.Model,
		Functions: orNull(hp["functions"]), Tools: orNull(hp["tools"]), ToolChoice: orNull(hp["tool_choice"]),
		TemplateMetadata: orEmptyObject(v.TemplateMetadata),
		Status:           "active", CreatedAt: p.CreatedAt, LastUpdatedAt: p.LastUpdatedAt, Object: "prompt",
		Messages: v.Messages, ConfigID: optional(v.ConfigID), Provider: optional(v.Provider),
		ProviderSettings: v.ProviderSettings, PublishedVersion: publishedNumber(p),
		LatestVersion: len(p.Versions), Source: source(p),
	}
}

// listItem is one entry of GET /v1/prompts.
type listItem struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	Slug             string    `json:"slug"`
	CollectionID     string    `json:"collection_id"`
	WorkspaceID      string    `json:"workspace_id"`
	Model            string    `json:"model"`
	Status           string    `json:"status"`
	CreatedAt        time.Time `json:"created_at"`
	LastUpdatedAt    time.Time `json:"last_updated_at"`
	Object           string    `json:"object"`
	PublishedVersion *int      `json:"published_version"`
	LatestVersion    int       `json:"latest_version"`
	Source           string    `json:"source"`
}

func viewListItem(p *prompts.Prompt) listItem {
	v := p.PublishedVersion()
	if v == nil {
		v = p.Latest()
	}
	return listItem{
		ID: p.ID, Name: p.Name, Slug: p.Slug, CollectionID: p.CollectionID, WorkspaceID: p.WorkspaceID,
		Model: v.Model, Status: "active", CreatedAt: p.CreatedAt, LastUpdatedAt: p.LastUpdatedAt, Object: "prompt",
		PublishedVersion: publishedNumber(p), LatestVersion: len(p.Versions), Source: source(p),
	}
}

// versionItem is one entry of GET /v1/prompts/{id}/versions.
type versionItem struct {
	ID                string    `json:"id"`
	PromptID          string    `json:"prompt_id"`
	PromptTemplate    string    `json:"prompt_template"`
	PromptVersion     int       `json:"prompt_version"`
	PromptDescription string    `json:"prompt_description"`
	LabelID           *string   `json:"label_id"`
	CreatedAt         time.Time `json:"created_at"`
	Status            string    `json:"status"`
	Object            string    `json:"object"`
	IsRawTemplate     int       `json:"is_raw_template"`
	Model             string    `json:"model"`
	Published         bool      `json:"published"`
}

func viewVersion(p *prompts.Prompt, v *prompts.Version) versionItem {
	tmpl, _ := json.Marshal(v.Messages)
	return versionItem{
		ID: v.ID, PromptID: p.ID, PromptTemplate: string(tmpl), PromptVersion: v.Number,
		PromptDescription: v.Description, LabelID: optional(v.LabelID), CreatedAt: v.CreatedAt,
		Status: "active", Object: "prompt", Model: v.Model, Published: p.Published == v.Number,
	}
}

type listResponse[T any] struct {
	Object string `json:"object"`
	Total  int    `json:"total"`
	Data   []T    `json:"data"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

func publishedNumber(p *prompts.Prompt) *int {
	if p.Published == 0 {
		return nil
	}
	n := p.Published
	return &n
}

func source(p *prompts.Prompt) string {
	if p.ReadOnly() {
		return "file"
	}
	return "api"
}
