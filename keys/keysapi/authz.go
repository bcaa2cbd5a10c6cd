package keysapi

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// Every handler of this package asks keys.Authorize before it reads or
// writes a record (see keys/authz.go for the rule); this file turns the
// call's identity into the rule's actor, records into its targets, and
// its refusals into the API's errors.

// actor returns the caller as the rule sees it (built once per call).
func (c *call) actor() *keys.Actor {
	if c.who == nil {
		// The caller carries its key's usage limit: no second lookup.
		c.who = keys.ActorOf(c.id)
	}
	return c.who
}

// authorize applies the rule; a refusal is the API's error.
func (c *call) authorize(act keys.Action, t *keys.Target) error {
	d := keys.Authorize(c.actor(), act, t)
	if d == nil {
		return nil
	}
	return denial(d)
}

func denial(d *keys.Denial) *apierror.Error {
	typ := apierror.TypeInvalidRequest
	if d.Status == http.StatusNotFound {
		typ = apierror.TypeNotFound
	}
	e := apierror.New(d.Status, typ, d.Message)
	if d.Code != "" {
		e = e.WithCode(d.Code)
	}
	if d.Param != "" {
		e.Param = d.Param
	}
	return e
}

// workspaceTarget is the workspace a list or create names (named, else
// the caller's own), with the organisation it belongs to.
func (c *call) workspaceTarget(kind, named string) (*keys.Target, error) {
	ws := named
	if ws == "" {
		ws = c.id.WorkspaceID
	} else if uuid.Validate(ws) != nil {
		return nil, apierror.BadRequest("workspace_id", "workspace_id must be a UUID")
	}
	return &keys.Target{Kind: kind, OrganisationID: c.workspaceOrganisation(ws), WorkspaceID: ws, Named: true}, nil
}

// listScope is the target of a list: the workspace named, else the
// caller's own for a workspace key and the whole organisation for an
// organisation key. It returns the workspace filter ("" for all).
func (c *call) listScope(kind, named string) (string, error) {
	if named == "" && c.id.Type == keys.TypeOrganisation {
		return "", c.authorize(keys.ActionList, &keys.Target{Kind: kind, OrganisationID: c.id.OrganisationID, Named: true})
	}
	t, err := c.workspaceTarget(kind, named)
	if err != nil {
		return "", err
	}
	return t.WorkspaceID, c.authorize(keys.ActionList, t)
}

// namedWorkspace checks the workspace a call on one record names with
// ?workspace_id= (none: the caller's own) and returns it.
func (c *call) namedWorkspace(kind string, act keys.Action) (string, error) {
	named := c.r.URL.Query().Get("workspace_id")
	t, err := c.workspaceTarget(kind, named)
	if err != nil {
		return "", err
	}
	if named == "" {
		return t.WorkspaceID, nil
	}
	return t.WorkspaceID, c.authorize(act, t)
}

// workspaceOrganisation is the organisation workspace ws belongs to: that
// of a Caddyfile key or of a record there of another organisation than
// the caller's, else the caller's (a workspace no other organisation
// holds records in is the caller's to use).
func (c *call) workspaceOrganisation(ws string) string {
	if ws == c.id.WorkspaceID {
		return c.id.OrganisationID
	}
	if org, ok := c.app.ForeignOrganisation(ws, c.id.OrganisationID); ok {
		return org
	}
	return c.id.OrganisationID
}

// grantOf is an API key record's grant.
func grantOf(r *keys.APIKey) *keys.Grant {
	return &keys.Grant{Organisation: r.Type == keys.TypeOrganisation, Scopes: r.Scopes,
		AllowedModels: r.AllowedModels, UsageLimits: r.UsageLimits}
}

// keyTarget is an API key record as the rule's target.
func keyTarget(r *keys.APIKey) *keys.Target {
	return &keys.Target{Kind: keys.KindAPIKey, ID: r.ID, OrganisationID: r.OrganisationID,
		WorkspaceID: r.WorkspaceID, Source: keys.SourceAPI, Grant: grantOf(r)}
}

// configKeyTarget is a Caddyfile key as the rule's target.
func configKeyTarget(id *identity.Caller) *keys.Target {
	g := keys.GrantOf(id)
	return &keys.Target{Kind: keys.KindAPIKey, ID: id.KeyID, OrganisationID: id.OrganisationID,
		WorkspaceID: id.WorkspaceID, Source: keys.SourceConfig, Grant: &g}
}

// sharedTarget is a Caddyfile virtual key or config: every key's to use,
// nobody's to change.
func sharedTarget(kind, name string) *keys.Target {
	return &keys.Target{Kind: kind, ID: name, Source: keys.SourceConfig, Shared: true}
}
