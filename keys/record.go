package keys

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Key types and sub-types, the path segments of
// POST /v1/api-keys/{type}/{sub_type}.
const (
	TypeOrganisation = identity.TypeOrganisation
	TypeWorkspace    = identity.TypeWorkspace
	SubTypeUser      = "user"
	SubTypeService   = "service"
)

// Statuses of a record. A revoked record is kept (as a tombstone) so its
// holder is told so, not merely that the key is unknown.
const (
	StatusActive    = "active"
	StatusDisabled  = "disabled"
	StatusRevoked   = "revoked"
	StatusExhausted = "exhausted"
)

// Sources of a record: the API's store or the Caddyfile.
const (
	SourceAPI    = identity.SourceAPI
	SourceConfig = identity.SourceConfig
)

// APIKey is a gateway key issued through the API. The key itself is never
// kept: Digest is its HMAC under the server secret, Prefix its first
// characters for display.
type APIKey struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Description    string            `json:"description,omitempty"`
	Type           string            `json:"type"`
	SubType        string            `json:"sub_type"`
	OrganisationID string            `json:"organisation_id"`
	WorkspaceID    string            `json:"workspace_id"`
	UserID         string            `json:"user_id,omitempty"`
	Scopes         []string          `json:"scopes"`
	RateLimits     json.RawMessage   `json:"rate_limits,omitempty"`
	UsageLimits    json.RawMessage   `json:"usage_limits,omitempty"`
	Defaults       identity.Defaults `json:"defaults"`
	AllowedModels  []string          `json:"allowed_models,omitempty"`
	ExpiresAt      *time.Time        `json:"expires_at,omitempty"`
	Status         string            `json:"status"`
	Prefix         string            `json:"prefix"`
	Digest         string            `json:"digest"`
	// PrevDigest keeps working until PrevUntil after a rotation.
	PrevDigest string     `json:"prev_digest,omitempty"`
	PrevUntil  *time.Time `json:"prev_until,omitempty"`
	// Rotation is the last rotation's replay record.
	Rotation  *Rotation `json:"rotation,omitempty"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Version counts the record's stored writes (1 when created): a write
	// is stored only over the version it read (see Store.swap).
	Version int64 `json:"version"`
}

// Rotation lets a retried rotate call with the same Idempotency-Key
// answer the same new key: IdemDigest is the HMAC of the Idempotency-Key,
// Params the HMAC of the call's parameters (a retry with other ones is
// refused, ErrIdempotencyMismatch), Box the new key sealed under a key
// derived from the server secret and the Idempotency-Key. The rotation
// and its claim of the Idempotency-Key are one swap of the record, so two
// instances given one Idempotency-Key at once rotate once.
type Rotation struct {
	IdemDigest string    `json:"idem_digest"`
	Params     string    `json:"params,omitempty"`
	Box        []byte    `json:"box,omitempty"`
	At         time.Time `json:"at"`
}

// VirtualKey is a provider credential stored through the API. Settings
// holds everything but the secrets, which are in Sealed.
type VirtualKey struct {
	ID             string             `json:"id"`
	Slug           string             `json:"slug"`
	Name           string             `json:"name"`
	Note           string             `json:"note,omitempty"`
	OrganisationID string             `json:"organisation_id"`
	WorkspaceID    string             `json:"workspace_id"`
	Settings       providers.Settings `json:"settings"`
	Sealed         *Sealed            `json:"sealed,omitempty"`
	// KeyHint is a few characters of the provider key, for recognising it.
	KeyHint     string          `json:"key_hint,omitempty"`
	RateLimits  json.RawMessage `json:"rate_limits,omitempty"`
	UsageLimits json.RawMessage `json:"usage_limits,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	Status      string          `json:"status"`
	Rotation    *Rotation       `json:"rotation,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// Version counts the record's stored writes (1 when created): a write
	// is stored only over the version it read (see Store.swap).
	Version int64 `json:"version"`
}

// ConfigVersion is one saved version of a config.
type ConfigVersion struct {
	VersionID string          `json:"version_id"`
	Config    json.RawMessage `json:"config"`
	CreatedAt time.Time       `json:"created_at"`
}

// MaxConfigVersions bounds the versions a config keeps.
const MaxConfigVersions = 50

// Config is a saved routing config stored through the API. Versions are
// oldest first; the last is in use.
type Config struct {
	ID             string          `json:"id"`
	Slug           string          `json:"slug"`
	Name           string          `json:"name"`
	OrganisationID string          `json:"organisation_id"`
	WorkspaceID    string          `json:"workspace_id"`
	Status         string          `json:"status"`
	IsDefault      int             `json:"is_default"`
	Versions       []ConfigVersion `json:"versions"`
	// Sealed holds, by version id, the whole body of each version that
	// names credentials, encrypted; the version's Config is then the body
	// with them masked (RedactConfig).
	Sealed    map[string]*Sealed `json:"sealed,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
	// Version counts the record's stored writes (1 when created): a write
	// is stored only over the version it read (see Store.swap).
	Version int64 `json:"version"`
	// Aliases are public model names that route by this config
	// (Store.ConfigAlias), each held by one config of the workspace.
	Aliases []string `json:"aliases,omitempty"`
}

// Latest returns the version in use.
func (c *Config) Latest() *ConfigVersion {
	if len(c.Versions) == 0 {
		return nil
	}
	return &c.Versions[len(c.Versions)-1]
}

// IsExpired reports whether t is at or past expiresAt.
func IsExpired(expiresAt *time.Time, t time.Time) bool {
	return expiresAt != nil && !t.Before(*expiresAt)
}

// ValidPattern reports whether p is a well-formed glob.
func ValidPattern(p string) bool {
	_, err := path.Match(p, "")
	return err == nil && p != "" && len(p) <= 256
}

// Scopes. A scope names a resource and an action; "*" grants every scope,
// "X.*" every action on X, and X.read also grants X.list.
var Scopes = []string{
	"api_keys.create", "api_keys.read", "api_keys.list", "api_keys.update", "api_keys.delete",
	"virtual_keys.create", "virtual_keys.read", "virtual_keys.list", "virtual_keys.update", "virtual_keys.delete",
	"configs.create", "configs.read", "configs.list", "configs.update", "configs.delete",
	"audit_logs.read", "audit_logs.list", "logs.view", "completions.write",
	"rate_limits.create", "rate_limits.read", "rate_limits.list", "rate_limits.update", "rate_limits.delete",
	"usage_limits.create", "usage_limits.read", "usage_limits.list", "usage_limits.update", "usage_limits.delete",
	"prompts.create", "prompts.read", "prompts.list", "prompts.update", "prompts.delete", "prompts.publish", "prompts.render",
	"*",
}

// ValidScope reports whether s is a known scope or a resource.action of
// another API of the reference (accepted and kept, so its SDK's calls
// work, but granting nothing here).
func ValidScope(s string) bool {
	if slices.Contains(Scopes, s) {
		return true
	}
	res, act, ok := strings.Cut(s, ".")
	return ok && res != "" && act != "" && len(s) <= 64 && !strings.ContainsAny(s, " \t\r\n/")
}
