// Package identity is who made a request: the authenticated caller, one
// typed value that every handler of a request reads (llm_ratelimit,
// llm_gateway, the management APIs), and the per-request state those
// handlers hand each other about it (see Request).
//
// It is a leaf: it imports nothing of the gateway's, so the record store
// (package keys) builds callers, and every package above reads them,
// without the type living in the llm app.
package identity

import (
	"encoding/json"
	"path"
	"strings"
)

// Sources of a caller: the API's record store, the Caddyfile, or an
// identity provider's token (package identity/jwtauth).
const (
	SourceAPI    = "api"
	SourceConfig = "config"
	SourceOIDC   = "oidc"
)

// UserPrefix starts the Name of a caller authenticated by an identity
// provider's token ("user:<sub>"). Rate limits, budgets and the ledger
// key on a caller's Name within its workspace, so no gateway key may be
// named so: a key named "user:alice" would share alice's counters.
const UserPrefix = "user:"

// ReservedName reports whether name is reserved for token users and so
// refused as a gateway key's name (see UserPrefix).
func ReservedName(name string) bool { return strings.HasPrefix(name, UserPrefix) }

// Types of key: a workspace key manages its own workspace's records, an
// organisation key every workspace of its organisation.
const (
	TypeOrganisation = "organisation"
	TypeWorkspace    = "workspace"
)

// Caller is who a valid gateway key belongs to. It never holds the key.
// Callers are built once per key (per record change for an API key) and
// shared by every request of that key: never modify one.
type Caller struct {
	// KeyID is the key's record id: the API's, or one derived from the
	// Caddyfile name.
	KeyID string
	// Name identifies the key in logs, metrics and rate-limit policies.
	Name string
	// Source is SourceConfig (the Caddyfile) or SourceAPI.
	Source string
	// Type is TypeWorkspace or TypeOrganisation.
	Type           string
	WorkspaceID    string
	OrganisationID string
	// Scopes are the management scopes held; nil for a Caddyfile key
	// without scopes (see Can).
	Scopes []string
	// Defaults route requests that name no config, virtual key or
	// provider, and add metadata (API keys only); nil when none are set.
	Defaults *Defaults
	// AllowedModels are glob patterns of the models the key may name;
	// empty allows every model (see AllowsModel).
	AllowedModels []string
	// UsageLimits is the key's own usage_limits member as stored (API
	// keys only): what the control plane compares when this key mints or
	// changes another (keys.Authorize). The limits that apply to a
	// request are found per request by the budget stage.
	UsageLimits json.RawMessage
}

// AllScopes reports whether the caller holds every scope: a Caddyfile key
// given none is its workspace's administrator (in its own workspace
// only: reach is the control plane's rule, keys.Authorize).
func (c *Caller) AllScopes() bool { return c.Scopes == nil && c.Source == SourceConfig }

// Can reports whether the caller holds scope for the management APIs.
func (c *Caller) Can(scope string) bool { return c.AllScopes() || HasScope(c.Scopes, scope) }

// AllowsModel reports whether the caller's key may name model.
func (c *Caller) AllowsModel(model string) bool { return ModelAllowed(c.AllowedModels, model) }

// Defaults route a request that names no config, virtual key or provider
// of its own, and add metadata under the request's.
type Defaults struct {
	ConfigID   string            `json:"config_id,omitempty"`
	VirtualKey string            `json:"virtual_key,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// IsZero reports whether d sets nothing.
func (d *Defaults) IsZero() bool {
	return d == nil || d.ConfigID == "" && d.VirtualKey == "" && len(d.Metadata) == 0
}

// HasScope reports whether held grants want: "*" grants every scope,
// "X.*" every action on X, and X.read also grants X.list.
func HasScope(held []string, want string) bool {
	res, act, _ := strings.Cut(want, ".")
	for _, h := range held {
		if h == "*" || h == want || h == res+".*" || act == "list" && h == res+".read" {
			return true
		}
	}
	return false
}

// ModelAllowed reports whether model matches one of the glob patterns
// (path.Match syntax: * ? [..]); an empty list allows every model.
func ModelAllowed(patterns []string, model string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, model); ok {
			return true
		}
	}
	return false
}
