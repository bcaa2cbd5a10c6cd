package keys

import "github.com/caddy-llm-gateway/caddy-llm-gateway/identity"

// CallerOf is the caller of an API key record: built once per record
// change and returned by every Lookup of that key, so authenticating a
// request allocates nothing.
func CallerOf(r *APIKey) *identity.Caller {
	c := &identity.Caller{
		KeyID: r.ID, Name: r.Name, Source: SourceAPI, Type: r.Type,
		WorkspaceID: r.WorkspaceID, OrganisationID: r.OrganisationID,
		Scopes: r.Scopes, AllowedModels: r.AllowedModels, UsageLimits: r.UsageLimits,
	}
	if !r.Defaults.IsZero() {
		d := r.Defaults
		c.Defaults = &d
	}
	return c
}

// GrantOf is what caller c may do and spend, as the control plane's rule
// compares it.
func GrantOf(c *identity.Caller) Grant {
	return Grant{Organisation: c.Type == TypeOrganisation, Scopes: c.Scopes,
		AllScopes: c.AllScopes(), AllowedModels: c.AllowedModels, UsageLimits: c.UsageLimits}
}

// ActorOf is caller c as the control plane's rule sees it.
func ActorOf(c *identity.Caller) *Actor {
	return &Actor{KeyID: c.KeyID, OrganisationID: c.OrganisationID, WorkspaceID: c.WorkspaceID, Grant: GrantOf(c)}
}

// Manages reports whether caller c may see and change records of
// workspace ws in organisation org: an organisation key any workspace of
// its organisation, any other key only its own workspace. It is the reach
// of the control plane's one rule (Authorize).
func Manages(c *identity.Caller, org, ws string) bool {
	a := Actor{OrganisationID: c.OrganisationID, WorkspaceID: c.WorkspaceID, Grant: GrantOf(c)}
	return a.Sees(org, ws, false)
}
