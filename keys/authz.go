package keys

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// The control plane's one authorisation rule. Every call of the keys API
// (keys, virtual keys, configs, audit log) asks Authorize whether its
// actor, the authenticated gateway key, may do an action to a target
// record, before it reads or writes anything; lists ask Sees of every
// record they would answer. The rule, in the order it is applied:
//
//  1. scope: the actor holds <kind>.<action> (rotate needs update,
//     reveal read);
//  2. tenancy: a record of another organisation is never reached, by any
//     id (404, as if absent); a named workspace of another organisation,
//     for a list or a create, is a 403 workspace_forbidden;
//  3. reach: a workspace key reaches its own workspace only, and never an
//     organisation key (which reaches further than it); an organisation
//     key every workspace of its organisation;
//  4. source: records declared in the Caddyfile are read-only (409
//     declared_in_caddyfile) and never disclose their credentials;
//  5. self: a key may not change its own name, scopes, models, limits or
//     expiry (403 self_change_forbidden);
//  6. grant: a key never writes, rotates, reveals or mints a key whose
//     scopes, reach, models or usage limit go beyond its own (403).
//
// Shared records (the Caddyfile's virtual keys and configs, which every
// key of the gateway may use) skip 2 and 3.

// Action is what a call does to its target.
type Action string

// Actions of the control plane.
const (
	ActionRead   Action = "read"
	ActionList   Action = "list"
	ActionCreate Action = "create"
	ActionUpdate Action = "update"
	ActionRotate Action = "rotate"
	ActionDelete Action = "delete"
	// ActionReveal discloses a record's secret: a gateway key (the answer
	// of create and rotate) or a stored credential (never disclosed).
	ActionReveal Action = "reveal"
)

// Kinds of target, named as their scopes' resources.
const (
	KindAPIKey     = "api_keys"
	KindVirtualKey = "virtual_keys"
	KindConfig     = "configs"
	KindAuditLog   = "audit_logs"
)

// Grant is what a gateway key may do and spend, the part of a key the
// rule compares between an actor and the key it acts on.
type Grant struct {
	// Organisation is set for an organisation key (reaches every
	// workspace of its organisation).
	Organisation bool
	// Scopes are the management scopes held; AllScopes (a Caddyfile key
	// given none) holds every one.
	Scopes    []string
	AllScopes bool
	// AllowedModels are glob patterns; empty allows every model.
	AllowedModels []string
	// UsageLimits is the key's usage_limits member as stored.
	UsageLimits json.RawMessage
}

// Actor is the authenticated gateway key making a call.
type Actor struct {
	KeyID          string
	OrganisationID string
	WorkspaceID    string
	Grant
}

// Target is the record a call acts on; for a list or a create, the
// workspace it names (with the organisation that workspace belongs to).
type Target struct {
	Kind           string
	ID             string
	OrganisationID string
	WorkspaceID    string
	// Source is SourceConfig for a record declared in the Caddyfile.
	Source string
	// Shared marks a record every key may read and use (the Caddyfile's
	// virtual keys and configs, which belong to no workspace).
	Shared bool
	// Grant is an API key's grant: the new key's for a create, the
	// current one's otherwise. Nil for other kinds.
	Grant *Grant
	// Next is an API key's grant after an update; nil when the update
	// changes none of it.
	Next *Grant
	// Changed names the members an update sets.
	Changed []string
	// Named is set when the call names the target workspace itself (a
	// list, a create, workspace_id=): a refusal then says the workspace
	// is out of reach (403) instead of hiding a record (404).
	Named bool
}

// Denial is the rule's refusal: the HTTP status and error code the API
// answers, and the member at fault.
type Denial struct {
	Status  int
	Code    string
	Param   string
	Message string
}

func (d *Denial) Error() string { return d.Message }

// Scope returns the scope an action on kind needs.
func Scope(kind string, a Action) string {
	switch a {
	case ActionRotate:
		a = ActionUpdate
	case ActionReveal:
		a = ActionRead
	}
	return kind + "." + string(a)
}

// Can reports whether the actor holds scope.
func (g *Grant) Can(scope string) bool { return g.AllScopes || identity.HasScope(g.Scopes, scope) }

// Sees reports whether the actor reaches a record of workspace ws in
// organisation org (orgKey: the record is an organisation key): rules 2
// and 3, without allocating, for lists.
func (a *Actor) Sees(org, ws string, orgKey bool) bool {
	if org != a.OrganisationID {
		return false
	}
	if a.Organisation {
		return true
	}
	return ws == a.WorkspaceID && !orgKey
}

// selfLocked are the members of its own record a key may not change: its
// name keys its usage limit, the rest bound what it may do.
var selfLocked = []string{"name", "scopes", "allowed_models", "usage_limits", "rate_limits", "expires_at"}

// Authorize returns nil when a may do act to t, else the Denial to
// answer.
func Authorize(a *Actor, act Action, t *Target) *Denial {
	if scope := Scope(t.Kind, act); !a.Can(scope) {
		return &Denial{Status: http.StatusForbidden, Code: "missing_scope",
			Message: fmt.Sprintf("this gateway API key lacks the scope %s", scope)}
	}
	if !t.Shared {
		orgKey := t.Grant != nil && t.Grant.Organisation
		if !a.Sees(t.OrganisationID, t.WorkspaceID, orgKey) {
			return hidden(a, t, orgKey)
		}
	}
	if t.Source == SourceConfig {
		switch act {
		case ActionCreate, ActionUpdate, ActionRotate, ActionDelete:
			return &Denial{Status: http.StatusConflict, Code: "declared_in_caddyfile",
				Message: fmt.Sprintf("%s %q is declared in the Caddyfile (the llm app's configuration) and is read-only here: change it there and reload", noun(t.Kind), t.ID)}
		}
		if act == ActionReveal {
			return notDisclosed()
		}
	}
	if act == ActionReveal && t.Kind != KindAPIKey {
		return notDisclosed()
	}
	if t.Kind != KindAPIKey || t.Grant == nil {
		return nil
	}
	if act == ActionUpdate && t.ID != "" && t.ID == a.KeyID {
		for _, f := range t.Changed {
			if slices.Contains(selfLocked, f) {
				return &Denial{Status: http.StatusForbidden, Code: "self_change_forbidden", Param: f,
					Message: fmt.Sprintf("a gateway API key cannot change its own %s; another key with api_keys.update that covers it can", f)}
			}
		}
	}
	switch act {
	case ActionCreate:
		return covers(&a.Grant, t.Grant)
	case ActionUpdate, ActionRotate, ActionDelete, ActionReveal:
		if d := covers(&a.Grant, t.Grant); d != nil {
			return &Denial{Status: http.StatusForbidden, Code: "key_beyond_reach", Param: d.Param,
				Message: fmt.Sprintf("this gateway API key cannot %s a key that goes beyond its own reach (%s)", act, d.Message)}
		}
		if act == ActionUpdate && t.Next != nil {
			return covers(&a.Grant, t.Next)
		}
	}
	return nil
}

func notDisclosed() *Denial {
	return &Denial{Status: http.StatusForbidden, Code: "credentials_not_disclosed",
		Message: "stored credentials and the Caddyfile's keys are never disclosed"}
}

// hidden is the refusal of a target out of reach: a 403 naming the
// workspace when the call named it (a list, a create), else a 404.
func hidden(a *Actor, t *Target, orgKey bool) *Denial {
	if t.Named {
		if orgKey && t.OrganisationID == a.OrganisationID && t.WorkspaceID == a.WorkspaceID {
			return &Denial{Status: http.StatusForbidden, Code: "workspace_forbidden",
				Message: "only an organisation key can create an organisation key"}
		}
		return &Denial{Status: http.StatusForbidden, Code: "workspace_forbidden", Param: "workspace_id",
			Message: fmt.Sprintf("workspace_id %s is not this gateway key's workspace", t.WorkspaceID)}
	}
	return &Denial{Status: http.StatusNotFound, Code: "",
		Message: fmt.Sprintf("%s %q not found", noun(t.Kind), t.ID)}
}

func noun(kind string) string {
	switch kind {
	case KindAPIKey:
		return "api key"
	case KindVirtualKey:
		return "virtual key"
	case KindConfig:
		return "config"
	}
	return "record"
}

// covers returns nil when grant g covers c: every scope of c held by g,
// c's reach within g's, c's models among g's, c's usage limit at most
// g's.
func covers(g, c *Grant) *Denial {
	if !g.AllScopes && !identity.HasScope(g.Scopes, "*") {
		if c.AllScopes {
			return beyond("scopes", "missing_scope", "every scope")
		}
		for _, s := range c.Scopes {
			if !identity.HasScope(g.Scopes, s) {
				return beyond("scopes", "missing_scope", "the scope "+s+", which it does not hold")
			}
		}
	}
	if c.Organisation && !g.Organisation {
		return beyond("type", "workspace_forbidden", "an organisation key's reach: only an organisation key can create an organisation key")
	}
	if !ModelsCover(g.AllowedModels, c.AllowedModels) {
		return beyond("allowed_models", "allowed_models_beyond_reach", "models outside its own allowed_models")
	}
	if !LimitsCover(g.UsageLimits, c.UsageLimits) {
		return beyond("usage_limits", "usage_limits_beyond_reach", "a usage limit above its own")
	}
	return nil
}

func beyond(param, code, what string) *Denial {
	return &Denial{Status: http.StatusForbidden, Code: code, Param: param,
		Message: "this gateway API key cannot grant " + what}
}

// ModelsCover reports whether every model the patterns child allow is
// allowed by parent: parent empty allows all; else child must be non-
// empty and each of its patterns equal a parent pattern, be a model name
// a parent pattern matches, or narrow a parent's trailing "*"
// ("gpt-4o-mini*" within "gpt-4o*"). Anything else is taken as wider.
func ModelsCover(parent, child []string) bool {
	if len(parent) == 0 {
		return true
	}
	if len(child) == 0 {
		return false
	}
	for _, c := range child {
		if !slices.ContainsFunc(parent, func(p string) bool { return patternCovers(p, c) }) {
			return false
		}
	}
	return true
}

const globMeta = `*?[\`

func patternCovers(p, c string) bool {
	if p == c {
		return true
	}
	if !strings.ContainsAny(c, globMeta) {
		ok, _ := path.Match(p, c)
		return ok
	}
	// c is a pattern: within p only when p is a literal prefix and one
	// trailing "*" (which matches any run without '/'), and c starts with
	// that prefix and adds nothing that could match a '/'.
	prefix, ok := strings.CutSuffix(p, "*")
	if !ok || strings.ContainsAny(prefix, globMeta) || !strings.HasPrefix(c, prefix) {
		return false
	}
	return !strings.ContainsAny(c[len(prefix):], `/[\`)
}

// usageLimit is what the gateway enforces of a key's usage_limits
// (app/budgetkeys.go builds a budget from the same members).
type usageLimit struct {
	Type           string   `json:"type"`
	CreditLimit    float64  `json:"credit_limit"`
	AlertThreshold *float64 `json:"alert_threshold"`
	PeriodicReset  string   `json:"periodic_reset"`
	Timezone       string   `json:"timezone"`
}

// parseLimit returns the enforced limit of raw; ok is false when raw sets
// none (no credit limit, so nothing is enforced).
func parseLimit(raw json.RawMessage) (l usageLimit, ok bool, valid bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return l, false, true
	}
	if json.Unmarshal(raw, &l) != nil {
		return l, false, false
	}
	if l.CreditLimit <= 0 {
		return l, false, true
	}
	if l.Type == "" {
		l.Type = "cost"
	}
	if l.PeriodicReset == "" {
		l.PeriodicReset = "none"
	}
	valid = (l.Type == "cost" || l.Type == "tokens") && l.CreditLimit <= 1e9 &&
		(l.AlertThreshold == nil || *l.AlertThreshold > 0 && *l.AlertThreshold <= l.CreditLimit) &&
		slices.Contains([]string{"none", "weekly", "monthly"}, l.PeriodicReset)
	return l, true, valid
}

// LimitsCover reports whether the usage limit child sets is at most
// parent's: parent sets none, or child sets one the gateway enforces of
// the same type, no greater credit, resetting no more often, in the same
// time zone.
func LimitsCover(parent, child json.RawMessage) bool {
	p, ok, _ := parseLimit(parent)
	if !ok {
		return true
	}
	c, ok, valid := parseLimit(child)
	if !ok || !valid {
		return false
	}
	return c.Type == p.Type && c.CreditLimit <= p.CreditLimit &&
		(c.PeriodicReset == p.PeriodicReset || c.PeriodicReset == "none") &&
		(c.Timezone == "" || c.Timezone == p.Timezone)
}

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
