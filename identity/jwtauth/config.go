// Package jwtauth authenticates callers by an identity provider's tokens:
// an OpenID Connect issuer's access (or ID) tokens, validated against its
// published keys, mapped to an identity.Caller by the token's claims and
// the configured groups, and cached by the token's digest for a
// documented TTL (docs/identity.md).
//
// The one caller type stays identity.Caller: a JWT user's Name is
// "user:<sub>", the name rate limits, budgets and the ledger already key
// on, so every road that authenticates through the llm app serves
// token callers the same way it serves gateway keys.
package jwtauth

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// Defaults of the configuration.
const (
	// DefaultCacheTTL is how long a validated token's caller (and its
	// userinfo) is reused before it is validated again: the longest a
	// user removed from a group keeps access (with userinfo).
	DefaultCacheTTL = time.Minute
	// MaxCacheTTL bounds cache_ttl.
	MaxCacheTTL = time.Hour
	// UserPrefix starts a token caller's Name (identity.UserPrefix).
	UserPrefix = identity.UserPrefix
)

// Config is the llm app's "oidc" member.
type Config struct {
	// Issuer is the IdP's issuer URL; its discovery document is read from
	// Issuer + "/.well-known/openid-configuration".
	Issuer string `json:"issuer"`
	// Audience lists the aud values a token must name one of; without
	// any, ClientID.
	Audience []string `json:"audience,omitempty"`
	// ClientID and ClientSecret are the console's OIDC client.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// RedirectURL is the console's callback URL as registered at the
	// IdP; without it, the request's own scheme and host.
	RedirectURL string `json:"redirect_url,omitempty"`
	// AllowedDomains, when set, admit only users whose email (or hd)
	// claim is in one of these domains.
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	// Algorithms narrow the accepted signing algorithms.
	Algorithms []string `json:"algorithms,omitempty"`
	// ClockSkew is how far exp, nbf and iat may be off (default 30s).
	ClockSkew caddy.Duration `json:"clock_skew,omitempty"`
	// CacheTTL is how long a token's caller is reused (default 1m).
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`
	// EgressAllow lets the IdP's addresses be non-public (loopback,
	// private, link_local, CIDRs), as the egress guard reads them.
	EgressAllow []string `json:"egress_allow,omitempty"`
	// UserInfo reads the mapped claims from the IdP's userinfo endpoint
	// (with the token), so a change at the IdP applies within CacheTTL.
	UserInfo bool `json:"userinfo,omitempty"`
	// WorkspaceID and OrganisationID place users no claim or group
	// places; they default to UUIDs derived from the issuer.
	WorkspaceID    string `json:"workspace_id,omitempty"`
	OrganisationID string `json:"organisation_id,omitempty"`
	// Claims names the claims mapped to the caller.
	Claims Claims `json:"claims,omitempty"`
	// Groups grant by membership of an IdP group; when any is set, a
	// user in none of them is refused.
	Groups []Group `json:"groups,omitempty"`
}

// Claims names the token claims read for the caller.
type Claims struct {
	// Workspace is a claim holding the workspace id.
	Workspace string `json:"workspace,omitempty"`
	// Scopes is a claim holding management scopes (array or
	// space-separated string).
	Scopes string `json:"scopes,omitempty"`
	// Models is a claim holding allowed model globs.
	Models string `json:"models,omitempty"`
	// Groups is the claim holding group names (default "groups").
	Groups string `json:"groups,omitempty"`
}

// Group is what membership of one IdP group grants.
type Group struct {
	Name string `json:"name"`
	// Type is "workspace" (default) or "organisation".
	Type        string   `json:"type,omitempty"`
	WorkspaceID string   `json:"workspace_id,omitempty"`
	Scopes      []string `json:"scopes,omitempty"`
	Models      []string `json:"models,omitempty"`
	// ConfigID and VirtualKey are the key defaults of the group's users.
	ConfigID   string `json:"config_id,omitempty"`
	VirtualKey string `json:"virtual_key,omitempty"`
}

// idNamespace derives stable ids from the issuer and subjects.
var idNamespace = uuid.MustParse("6f1c8c52-6d55-4e52-9a59-7c1f3c1f0a41")

// check validates c and fills its defaults.
func (c *Config) check() error {
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("oidc: issuer must be an http(s) URL")
	}
	if len(c.Audience) == 0 {
		if c.ClientID == "" {
			return fmt.Errorf("oidc: audience (or client_id) is required")
		}
		c.Audience = []string{c.ClientID}
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = caddy.Duration(DefaultClockSkew)
	}
	if c.ClockSkew < 0 || time.Duration(c.ClockSkew) > MaxClockSkew {
		return fmt.Errorf("oidc: clock_skew must be between 0 and %v", MaxClockSkew)
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = caddy.Duration(DefaultCacheTTL)
	}
	if c.CacheTTL < 0 || time.Duration(c.CacheTTL) > MaxCacheTTL {
		return fmt.Errorf("oidc: cache_ttl must be between 0 and %v", MaxCacheTTL)
	}
	if c.Claims.Groups == "" {
		c.Claims.Groups = "groups"
	}
	if c.OrganisationID == "" {
		c.OrganisationID = uuid.NewSHA1(idNamespace, []byte("org:"+c.Issuer)).String()
	}
	if c.WorkspaceID == "" {
		c.WorkspaceID = uuid.NewSHA1(idNamespace, []byte("ws:"+c.Issuer)).String()
	}
	for i := range c.AllowedDomains {
		c.AllowedDomains[i] = strings.ToLower(strings.TrimPrefix(c.AllowedDomains[i], "@"))
	}
	seen := map[string]bool{}
	for _, g := range c.Groups {
		if g.Name == "" || seen[g.Name] {
			return fmt.Errorf("oidc: group %q: names must be given once and not be empty", g.Name)
		}
		seen[g.Name] = true
		if g.Type != "" && g.Type != identity.TypeWorkspace && g.Type != identity.TypeOrganisation {
			return fmt.Errorf("oidc: group %q: type must be workspace or organisation", g.Name)
		}
	}
	return nil
}

// userKeyID is the stable id of the user sub of issuer: a user is sub and
// issuer together.
func userKeyID(issuer, sub string) string {
	return uuid.NewSHA1(idNamespace, []byte("user:"+issuer+"\x00"+sub)).String()
}
