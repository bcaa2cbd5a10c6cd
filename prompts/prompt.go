package prompts

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
)

// Prompt is one prompt template with all its versions. Records handed out
// by a Registry are shared with its cache: read them, never modify them.
type Prompt struct {
	// ID is a UUID. File prompts without one get a UUID derived from
	// their slug, so the id is the same on every instance and reload.
	ID string `json:"id"`
	// Slug names the prompt in URLs beside its id. It is unique among the
	// prompts a workspace sees.
	Slug string `json:"slug"`
	Name string `json:"name"`
	// CollectionID is accepted and stored for SDK compatibility; the
	// gateway gives it no meaning besides filtering lists.
	CollectionID string `json:"collection_id,omitempty"`
	// WorkspaceID owns the prompt. Empty only for file prompts that every
	// workspace sees.
	WorkspaceID string `json:"workspace_id,omitempty"`
	// Published is the number of the published version, 0 for none. A
	// bare prompt id resolves to it.
	Published int `json:"published_version,omitempty"`
	// Versions are numbered from 1 in order; Versions[i].Number == i+1.
	Versions      []*Version `json:"versions"`
	CreatedAt     time.Time  `json:"created_at"`
	LastUpdatedAt time.Time  `json:"last_updated_at"`

	// File is the base name of the file a prompt was loaded from, empty
	// for prompts created through the API. File prompts are read-only.
	File string `json:"-"`
}

// Version is one immutable revision of a prompt: the template, the model,
// the provider to reach and the saved hyperparameters. Only Description,
// TemplateMetadata and LabelID may change after it is created.
type Version struct {
	ID     string `json:"id"`
	Number int    `json:"version"`
	// Messages is the template: chat messages whose contents (strings, or
	// the text of text parts) are Mustache templates.
	Messages []Message `json:"messages"`
	Model    string    `json:"model,omitempty"`
	Target
	// Hyperparameters are chat-completion request fields saved with the
	// version (temperature, max_tokens, tools, response_format, …), sent
	// as they are unless a request overrides them.
	Hyperparameters  map[string]json.RawMessage `json:"hyperparameters,omitempty"`
	Description      string                     `json:"description,omitempty"`
	TemplateMetadata json.RawMessage            `json:"template_metadata,omitempty"`
	LabelID          string                     `json:"label_id,omitempty"`
	CreatedAt        time.Time                  `json:"created_at"`

	compiled []compiledMessage
}

// Message is one chat message of a template.
type Message struct {
	Role string `json:"role"`
	// Content is a JSON string, or an array of content parts whose text
	// parts ({"type":"text","text":…}) are templates and whose other
	// parts are sent as they are.
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

// Target says how a version reaches its provider. At most one of
// VirtualKey, ConfigID and Provider is set; none means the caller's own
// provider headers decide, as for any chat completion.
type Target struct {
	// VirtualKey names a virtual key of the llm app.
	VirtualKey string `json:"virtual_key,omitempty"`
	// ConfigID names a saved configuration of the llm app.
	ConfigID string `json:"config_id,omitempty"`
	// Provider is a provider slug; ProviderSettings adds configuration
	// object fields such as custom_host or cloud regions. Credentials are
	// never stored in a prompt: they belong in virtual keys, or come from
	// the caller's Authorization header.
	Provider         string                     `json:"provider,omitempty"`
	ProviderSettings map[string]json.RawMessage `json:"provider_settings,omitempty"`
}

// IsZero reports whether the version names no provider.
func (t *Target) IsZero() bool {
	return t.VirtualKey == "" && t.ConfigID == "" && t.Provider == ""
}

// ConfigObject returns the target as a configuration object the routing
// layer can plan from: {"virtual_key": …} or {"provider": …, settings…}.
// It returns nil for a saved config (use ConfigID) and for no target.
func (t *Target) ConfigObject() []byte {
	switch {
	case t.VirtualKey != "":
		b, _ := json.Marshal(map[string]string{"virtual_key": t.VirtualKey})
		return b
	case t.Provider != "":
		m := make(map[string]json.RawMessage, len(t.ProviderSettings)+1)
		for k, v := range t.ProviderSettings {
			m[k] = v
		}
		m["provider"], _ = json.Marshal(t.Provider)
		b, _ := json.Marshal(m)
		return b
	}
	return nil
}

// providerSettingKeys are the configuration object fields a prompt may
// store beside a provider slug: where and how to reach it, never a secret.
var providerSettingKeys = []string{
	"api_version", "cloudb_api_version", "cloudb_deployment_name", "cloudb_deployment_type",
	"cloudb_endpoint_name", "cloudb_region", "clouda_region", "cloudc_project_id", "cloudc_region",
	"custom_host", "deployment_id", "deployments", "forward_headers", "override_params",
	"request_timeout", "resource_name", "strict_open_ai_compliance", "vendor_organization", "vendor_project",
}

// validate checks a target's shape; field is the JSON path prefix used in
// messages ("versions[0]." or "").
func (t *Target) validate(field string) error {
	n := 0
	for _, s := range []string{t.VirtualKey, t.ConfigID, t.Provider} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return fieldErr(field+"virtual_key", "give at most one of virtual_key, config_id and provider")
	}
	if len(t.ProviderSettings) > 0 && t.Provider == "" {
		return fieldErr(field+"provider_settings", "needs provider")
	}
	for k := range t.ProviderSettings {
		if !slices.Contains(providerSettingKeys, k) {
			return fieldErr(field+"provider_settings."+k, "is not a provider setting a prompt may store (credentials belong in a virtual key); allowed: %s", strings.Join(providerSettingKeys, ", "))
		}
	}
	return nil
}

// Latest returns the newest version.
func (p *Prompt) Latest() *Version {
	if len(p.Versions) == 0 {
		return nil
	}
	return p.Versions[len(p.Versions)-1]
}

// Version returns version n, or nil.
func (p *Prompt) Version(n int) *Version {
	if n < 1 || n > len(p.Versions) {
		return nil
	}
	return p.Versions[n-1]
}

// PublishedVersion returns the published version, or nil when none is.
func (p *Prompt) PublishedVersion() *Version { return p.Version(p.Published) }

// ReadOnly reports whether the prompt comes from a file, so the API must
// not change it.
func (p *Prompt) ReadOnly() bool { return p.File != "" }

// visibleTo reports whether a workspace sees the prompt.
func (p *Prompt) visibleTo(workspaceID string) bool {
	return p.WorkspaceID == "" || p.WorkspaceID == workspaceID
}

// FieldError is a validation error naming the offending field by its JSON
// path (e.g. "versions[1].messages[0].content").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// validRoles are the chat roles a template message may have.
var validRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// reservedHyperparameters are request fields a saved version must not
// hold: the template provides the messages, and these are the render
// body's own fields.
var reservedHyperparameters = []string{"messages", "variables", "prompt_id", "hyperparameters"}

// validate checks a version and compiles its template. prefix is the JSON
// path of the version in messages ("versions[1]." in files, "" in the API).
func (v *Version) validate(prefix string) error {
	if len(v.Messages) == 0 {
		return fieldErr(prefix+"messages", "at least one message is required")
	}
	for i, m := range v.Messages {
		f := fmt.Sprintf("%smessages[%d]", prefix, i)
		if !slices.Contains(validRoles, m.Role) {
			return fieldErr(f+".role", "must be one of %s, got %q", strings.Join(validRoles, ", "), m.Role)
		}
	}
	if err := v.Target.validate(prefix); err != nil {
		return err
	}
	for k, raw := range v.Hyperparameters {
		if slices.Contains(reservedHyperparameters, k) || k == "model" {
			return fieldErr(prefix+"hyperparameters."+k, "is not a hyperparameter (the model has its own field; the template gives the messages)")
		}
		if !json.Valid(raw) {
			return fieldErr(prefix+"hyperparameters."+k, "is not valid JSON")
		}
	}
	if len(v.TemplateMetadata) > 0 && !isJSONObject(v.TemplateMetadata) {
		return fieldErr(prefix+"template_metadata", "must be a JSON object")
	}
	compiled, err := compileMessages(v.Messages, prefix)
	if err != nil {
		return err
	}
	v.compiled = compiled
	return nil
}

// validate checks a whole prompt record.
func (p *Prompt) validate() error {
	if strings.TrimSpace(p.Name) == "" {
		return fieldErr("name", "is required")
	}
	if p.Slug == "" || Slugify(p.Slug) != p.Slug {
		return fieldErr("slug", "%q is not a slug (lower-case letters, digits and dashes)", p.Slug)
	}
	if _, err := uuid.Parse(p.ID); err != nil {
		return fieldErr("id", "must be a UUID")
	}
	if p.WorkspaceID != "" {
		if _, err := uuid.Parse(p.WorkspaceID); err != nil {
			return fieldErr("workspace_id", "must be a UUID")
		}
	}
	if len(p.Versions) == 0 {
		return fieldErr("versions", "at least one version is required")
	}
	for i, v := range p.Versions {
		v.Number = i + 1
		if err := v.validate(fmt.Sprintf("versions[%d].", i)); err != nil {
			return err
		}
	}
	if p.Published < 0 || p.Published > len(p.Versions) {
		return fieldErr("published_version", "version %d does not exist (the prompt has %d)", p.Published, len(p.Versions))
	}
	return nil
}

// Slugify turns a name into a slug: lower-case letters and digits, runs of
// anything else collapsed to one dash, at most 64 characters. Other
// letters are kept only when they are ASCII, so slugs are safe in URLs.
func Slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if b.Len() >= 64 {
				break
			}
			continue
		}
		dash = true
	}
	return b.String()
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// clone returns a deep enough copy of p for a write: the prompt and its
// version slice are new, versions are shared until replaced.
func (p *Prompt) clone() *Prompt {
	c := *p
	c.Versions = slices.Clone(p.Versions)
	return &c
}

// derivedID makes stable UUIDs for file prompts and their versions.
var derivedID = uuid.MustParse("0b7e3c55-5f7a-4d0e-9a51-2f1f0a6f6d3e")

func deriveID(parts ...string) string {
	return uuid.NewSHA1(derivedID, []byte(strings.Join(parts, "\x00"))).String()
}
