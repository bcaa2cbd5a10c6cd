package promptapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// promptBody is the body of POST /v1/prompts and PUT /v1/prompts/{id}, as
// the portkey-ai SDK sends it. Pointers tell "not given" from empty, which
// a partial update needs. Fields the SDK or Portkey's own API may send and
// the gateway has no use for (is_raw_template, patch, ai_model_id, …) are
// ignored, so the SDK works unchanged.
type promptBody struct {
	Name         *string `json:"name"`
	CollectionID *string `json:"collection_id"`
	WorkspaceID  *string `json:"workspace_id"`

	// String is the template: a JSON array of chat messages, as a string.
	String     *string                    `json:"string"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Model      *string                    `json:"model"`
	Tools      json.RawMessage            `json:"tools"`
	ToolChoice json.RawMessage            `json:"tool_choice"`
	Functions  json.RawMessage            `json:"functions"`

	VirtualKey       *string                    `json:"virtual_key"`
	ConfigID         *string                    `json:"config_id"`
	Provider         *string                    `json:"provider"`
	ProviderSettings map[string]json.RawMessage `json:"provider_settings"`

	VersionDescription *string         `json:"version_description"`
	TemplateMetadata   json.RawMessage `json:"template_metadata"`
	// PromptMetadata is what Portkey's update endpoint calls
	// template_metadata; both are accepted.
	PromptMetadata json.RawMessage `json:"prompt_metadata"`
}

func decodeBody(body []byte, into any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return apierror.BadRequest("", "the request body must be a JSON object")
	}
	if err := json.Unmarshal(body, into); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
			return apierror.BadRequest(te.Field, "%s has the wrong type: %v", te.Field, err)
		}
		return apierror.BadRequest("", "invalid JSON body: %v", err)
	}
	return nil
}

// touchesVersion reports whether an update gives any field of a version,
// so that it must create one.
func (b *promptBody) touchesVersion() bool {
	return b.String != nil || b.Parameters != nil || b.Model != nil || given(b.Tools) || given(b.ToolChoice) ||
		given(b.Functions) || b.VirtualKey != nil || b.ConfigID != nil || b.Provider != nil ||
		b.ProviderSettings != nil || b.VersionDescription != nil || given(b.TemplateMetadata) || given(b.PromptMetadata)
}

func given(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s != "" && s != "null"
}

// applyTo sets the fields the body gives on v, which is a fresh version
// (create) or a copy of the latest one (update). parameters replaces the
// saved hyperparameters as a whole; tools, tool_choice and functions given
// at the top level then win over the same keys inside parameters. A model
// inside parameters is the version's model unless model is given too.
// Giving any of virtual_key, config_id and provider replaces the version's
// target as a whole.
func (b *promptBody) applyTo(v *prompts.Version) error {
	if b.String != nil {
		msgs, err := parseTemplateString(*b.String)
		if err != nil {
			return err
		}
		v.Messages = msgs
	}
	if b.Parameters != nil {
		hp := make(map[string]json.RawMessage, len(b.Parameters))
		for k, raw := range b.Parameters {
			if !given(raw) {
				continue
			}
			if k == "model" {
				var m string
				if err := json.Unmarshal(raw, &m); err != nil {
					return apierror.BadRequest("parameters.model", "parameters.model must be a string")
				}
				if b.Model == nil {
					v.Model = m
				}
				continue
			}
			hp[k] = raw
		}
		v.Hyperparameters = hp
	}
	if b.Model != nil {
		v.Model = *b.Model
	}
	for key, raw := range map[string]json.RawMessage{"tools": b.Tools, "tool_choice": b.ToolChoice, "functions": b.Functions} {
		if given(raw) {
			if v.Hyperparameters == nil {
				v.Hyperparameters = map[string]json.RawMessage{}
			} else {
				v.Hyperparameters = maps.Clone(v.Hyperparameters)
			}
			v.Hyperparameters[key] = raw
		}
	}
	if b.VirtualKey != nil || b.ConfigID != nil || b.Provider != nil || b.ProviderSettings != nil {
		v.Target = prompts.Target{VirtualKey: deref(b.VirtualKey), ConfigID: deref(b.ConfigID), Provider: deref(b.Provider), ProviderSettings: b.ProviderSettings}
	}
	v.Description = deref(b.VersionDescription)
	switch {
	case given(b.TemplateMetadata):
		v.TemplateMetadata = b.TemplateMetadata
	case given(b.PromptMetadata):
		v.TemplateMetadata = b.PromptMetadata
	}
	v.LabelID = ""
	return nil
}

// parseTemplateString decodes the SDK's "string" field: chat messages
// serialised as a JSON array. Unknown message fields are refused so a
// typo ("contents") is not silently dropped.
func parseTemplateString(s string) ([]prompts.Message, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var msgs []prompts.Message
	if err := dec.Decode(&msgs); err != nil {
		return nil, apierror.BadRequest("string", "string must be a JSON array of chat messages ({\"role\":…,\"content\":…}) serialised as a string: %v", err)
	}
	if len(msgs) == 0 {
		return nil, apierror.BadRequest("string", "string must hold at least one chat message")
	}
	for i, m := range msgs {
		if len(m.Content) == 0 {
			return nil, apierror.BadRequest(fmt.Sprintf("string[%d].content", i), "message %d has no content", i)
		}
	}
	return msgs, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// versionBody is the body of PUT /v1/prompts/{id}/versions/{versionId}.
// Only metadata may change; the template fields are listed so that a
// client trying to edit them gets a clear 400 instead of a silent no-op.
type versionBody struct {
	LabelID            *string         `json:"label_id"`
	Description        *string         `json:"description"`
	VersionDescription *string         `json:"version_description"`
	PromptDescription  *string         `json:"prompt_description"`
	TemplateMetadata   json.RawMessage `json:"template_metadata"`
	PromptMetadata     json.RawMessage `json:"prompt_metadata"`

	String     json.RawMessage `json:"string"`
	Messages   json.RawMessage `json:"messages"`
	Parameters json.RawMessage `json:"parameters"`
	Model      json.RawMessage `json:"model"`
	VirtualKey json.RawMessage `json:"virtual_key"`
	Tools      json.RawMessage `json:"tools"`
}

func (b *versionBody) meta() (prompts.VersionMeta, error) {
	for name, raw := range map[string]json.RawMessage{"string": b.String, "messages": b.Messages, "parameters": b.Parameters, "model": b.Model, "virtual_key": b.VirtualKey, "tools": b.Tools} {
		if given(raw) {
			return prompts.VersionMeta{}, apierror.BadRequest(name, "a version's %s is immutable; PUT /v1/prompts/{promptId} creates a new version", name)
		}
	}
	m := prompts.VersionMeta{LabelID: b.LabelID}
	for _, d := range []*string{b.Description, b.VersionDescription, b.PromptDescription} {
		if d != nil {
			m.Description = d
		}
	}
	switch {
	case given(b.TemplateMetadata):
		m.TemplateMetadata = b.TemplateMetadata
	case given(b.PromptMetadata):
		m.TemplateMetadata = b.PromptMetadata
	}
	return m, nil
}
