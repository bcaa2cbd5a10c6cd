package jwtauth

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// Claim value bounds: a claim is client-controlled only through the IdP,
// but the caller it builds lives in the cache.
const (
	maxClaimValues = 256
	maxClaimValue  = 256
)

// mapCaller builds the caller of a validated token's claims (merged with
// userinfo's when configured), or a *Reason refusing it.
func (c *Config) mapCaller(sub string, claims map[string]json.RawMessage) (*identity.Caller, error) {
	if len(c.AllowedDomains) > 0 && !c.domainAllowed(claims) {
		return nil, refuse(CodeForbidden, "the token's user is not in a domain this gateway admits")
	}
	id := &identity.Caller{
		KeyID: userKeyID(c.Issuer, sub), Name: UserPrefix + sub, Source: identity.SourceOIDC,
		Type: identity.TypeWorkspace, WorkspaceID: c.WorkspaceID, OrganisationID: c.OrganisationID,
		Scopes: []string{},
	}
	if len(c.Groups) > 0 {
		member := stringsClaim(claims[c.Claims.Groups])
		matched := false
		// Groups apply in configuration order: the first placing the
		// user names its workspace, type and key defaults; scopes and
		// models add up.
		for _, g := range c.Groups {
			if !slices.Contains(member, g.Name) {
				continue
			}
			if !matched {
				if g.Type != "" {
					id.Type = g.Type
				}
				if g.WorkspaceID != "" {
					id.WorkspaceID = g.WorkspaceID
				}
				if g.ConfigID != "" || g.VirtualKey != "" {
					id.Defaults = &identity.Defaults{ConfigID: g.ConfigID, VirtualKey: g.VirtualKey}
				}
			}
			matched = true
			id.Scopes = appendNew(id.Scopes, g.Scopes...)
			id.AllowedModels = appendNew(id.AllowedModels, g.Models...)
		}
		if !matched {
			return nil, refuse(CodeForbidden, "the token's user is in no group this gateway admits")
		}
	}
	if c.Claims.Workspace != "" {
		if ws := stringClaim(claims[c.Claims.Workspace]); ws != "" {
			if _, err := uuid.Parse(ws); err != nil {
				return nil, refuse(CodeForbidden, "the token's workspace claim is not a workspace id (a UUID)")
			}
			id.WorkspaceID = ws
		}
	}
	if c.Claims.Scopes != "" {
		id.Scopes = appendNew(id.Scopes, stringsClaim(claims[c.Claims.Scopes])...)
	}
	if c.Claims.Models != "" {
		id.AllowedModels = appendNew(id.AllowedModels, stringsClaim(claims[c.Claims.Models])...)
	}
	return id, nil
}

// domainAllowed reports whether the email claim (or Google's hd) is in
// an allowed domain. An email the IdP says is unverified does not count.
func (c *Config) domainAllowed(claims map[string]json.RawMessage) bool {
	var verified *bool
	if raw, ok := claims["email_verified"]; ok {
		var v bool
		if json.Unmarshal(raw, &v) == nil {
			verified = &v
		}
	}
	domain := ""
	if email := stringClaim(claims["email"]); email != "" && (verified == nil || *verified) {
		if at := strings.LastIndexByte(email, '@'); at >= 0 {
			domain = strings.ToLower(email[at+1:])
		}
	}
	if domain == "" {
		domain = strings.ToLower(stringClaim(claims["hd"]))
	}
	return domain != "" && slices.Contains(c.AllowedDomains, domain)
}

// stringClaim reads a string claim of at most maxClaimValue bytes.
func stringClaim(raw json.RawMessage) string {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil || len(s) > maxClaimValue {
		return ""
	}
	return s
}

// stringsClaim reads an array of strings, or a space-separated string
// (as OAuth's scope claim is), dropping values over the bounds.
func stringsClaim(raw json.RawMessage) []string {
	if raw == nil {
		return nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		list = strings.Fields(s)
	}
	out := list[:0]
	for _, v := range list {
		if v != "" && len(v) <= maxClaimValue && len(out) < maxClaimValues {
			out = append(out, v)
		}
	}
	return out
}

func appendNew(to []string, vs ...string) []string {
	for _, v := range vs {
		if !slices.Contains(to, v) {
			to = append(to, v)
		}
	}
	return to
}
