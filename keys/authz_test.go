package keys

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The control plane's rule as one table: actors × targets × actions.
// Outcomes: ok, 404 (hidden), 409 (Caddyfile, read-only), scope
// (missing_scope), beyond (key_beyond_reach), self
// (self_change_forbidden), secret (credentials_not_disclosed).

const (
	orgA, orgB = "org-a", "org-b"
	ws1, ws2   = "ws-1", "ws-2"
)

func limit(credit float64, reset string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"credit_limit":%g,"periodic_reset":%q}`, credit, reset))
}

var authzActors = map[string]*Actor{
	"org *":             {KeyID: "k-org-star", OrganisationID: orgA, WorkspaceID: ws1, Grant: Grant{Organisation: true, Scopes: []string{"*"}}},
	"org limited":       {KeyID: "k-org-lim", OrganisationID: orgA, WorkspaceID: ws1, Grant: Grant{Organisation: true, Scopes: []string{"api_keys.read", "virtual_keys.read", "configs.read"}}},
	"workspace admin":   {KeyID: "k-ws-admin", OrganisationID: orgA, WorkspaceID: ws1, Grant: Grant{Scopes: []string{"api_keys.*", "virtual_keys.*", "configs.*"}}},
	"only update":       {KeyID: "k-upd", OrganisationID: orgA, WorkspaceID: ws1, Grant: Grant{Scopes: []string{"api_keys.update"}}},
	"model-restricted":  {KeyID: "k-models", OrganisationID: orgA, WorkspaceID: ws1, Grant: Grant{Scopes: []string{"api_keys.*"}, AllowedModels: []string{"gpt-4o*"}, UsageLimits: limit(10, "monthly")}},
	"Caddyfile, scopes": {KeyID: "k-caddy", OrganisationID: orgA, WorkspaceID: ws1, Grant: Grant{AllScopes: true}},
}

func apiKeyTarget(id, org, ws string, g Grant) *Target {
	return &Target{Kind: KindAPIKey, ID: id, OrganisationID: org, WorkspaceID: ws, Source: SourceAPI, Grant: &g}
}

// authzTargets are the records acted on; "own" is the actor's record.
var authzTargets = map[string]func(a *Actor) *Target{
	"own": func(a *Actor) *Target { return apiKeyTarget(a.KeyID, a.OrganisationID, a.WorkspaceID, a.Grant) },
	"sibling": func(*Actor) *Target {
		return apiKeyTarget("k-sib", orgA, ws1, Grant{Scopes: []string{"api_keys.update"}, AllowedModels: []string{"gpt-4o-mini"}, UsageLimits: limit(5, "monthly")})
	},
	"sibling *": func(*Actor) *Target { return apiKeyTarget("k-sib-star", orgA, ws1, Grant{Scopes: []string{"*"}}) },
	"other workspace": func(*Actor) *Target {
		return apiKeyTarget("k-ws2", orgA, ws2, Grant{Scopes: []string{"api_keys.read"}})
	},
	"other org": func(*Actor) *Target {
		return apiKeyTarget("k-orgb", orgB, ws1, Grant{Scopes: []string{"api_keys.read"}})
	},
	"organisation key": func(*Actor) *Target {
		return apiKeyTarget("k-org", orgA, ws1, Grant{Organisation: true, Scopes: []string{"api_keys.read"}})
	},
	"Caddyfile key": func(*Actor) *Target {
		t := apiKeyTarget("k-cf", orgA, ws1, Grant{AllScopes: true})
		t.Source = SourceConfig
		return t
	},
	"virtual key": func(*Actor) *Target {
		return &Target{Kind: KindVirtualKey, ID: "vk", OrganisationID: orgA, WorkspaceID: ws1, Source: SourceAPI}
	},
	"other org's vk": func(*Actor) *Target {
		return &Target{Kind: KindVirtualKey, ID: "vk", OrganisationID: orgB, WorkspaceID: ws1, Source: SourceAPI}
	},
	"Caddyfile config": func(*Actor) *Target { return &Target{Kind: KindConfig, ID: "cfg", Source: SourceConfig, Shared: true} },
	"other org's config": func(*Actor) *Target {
		return &Target{Kind: KindConfig, ID: "cfg", OrganisationID: orgB, WorkspaceID: ws2, Source: SourceAPI}
	},
}

var authzActions = []Action{ActionRead, ActionUpdate, ActionRotate, ActionDelete, ActionReveal}

// authzWant: per actor and target, the outcome of read, update (of
// usage_limits), rotate, delete and reveal.
var authzWant = map[string]map[string]string{
	"org *": {
		"own": "ok self ok ok ok", "sibling": "ok ok ok ok ok", "sibling *": "ok ok ok ok ok",
		"other workspace": "ok ok ok ok ok", "other org": "404 404 404 404 404", "organisation key": "ok ok ok ok ok",
		"Caddyfile key": "ok 409 409 409 secret", "virtual key": "ok ok ok ok secret", "other org's vk": "404 404 404 404 404",
		"Caddyfile config": "ok 409 409 409 secret", "other org's config": "404 404 404 404 404",
	},
	"org limited": {
		"own": "ok scope scope scope ok", "sibling": "ok scope scope scope beyond", "sibling *": "ok scope scope scope beyond",
		"other workspace": "ok scope scope scope ok", "other org": "404 scope scope scope 404", "organisation key": "ok scope scope scope ok",
		"Caddyfile key": "ok scope scope scope secret", "virtual key": "ok scope scope scope secret", "other org's vk": "404 scope scope scope 404",
		"Caddyfile config": "ok scope scope scope secret", "other org's config": "404 scope scope scope 404",
	},
	"workspace admin": {
		"own": "ok self ok ok ok", "sibling": "ok ok ok ok ok", "sibling *": "ok beyond beyond beyond beyond",
		"other workspace": "404 404 404 404 404", "other org": "404 404 404 404 404", "organisation key": "404 404 404 404 404",
		"Caddyfile key": "ok 409 409 409 secret", "virtual key": "ok ok ok ok secret", "other org's vk": "404 404 404 404 404",
		"Caddyfile config": "ok 409 409 409 secret", "other org's config": "404 404 404 404 404",
	},
	"only update": {
		"own": "scope self ok scope scope", "sibling": "scope ok ok scope scope", "sibling *": "scope beyond beyond scope scope",
		"other workspace": "scope 404 404 scope scope", "other org": "scope 404 404 scope scope", "organisation key": "scope 404 404 scope scope",
		"Caddyfile key": "scope 409 409 scope scope", "virtual key": "scope scope scope scope scope", "other org's vk": "scope scope scope scope scope",
		"Caddyfile config": "scope scope scope scope scope", "other org's config": "scope scope scope scope scope",
	},
	"model-restricted": {
		"own": "ok self ok ok ok", "sibling": "ok ok ok ok ok", "sibling *": "ok beyond beyond beyond beyond",
		"other workspace": "404 404 404 404 404", "other org": "404 404 404 404 404", "organisation key": "404 404 404 404 404",
		"Caddyfile key": "ok 409 409 409 secret", "virtual key": "scope scope scope scope scope", "other org's vk": "scope scope scope scope scope",
		"Caddyfile config": "scope scope scope scope scope", "other org's config": "scope scope scope scope scope",
	},
	"Caddyfile, scopes": {
		"own": "ok self ok ok ok", "sibling": "ok ok ok ok ok", "sibling *": "ok ok ok ok ok",
		"other workspace": "404 404 404 404 404", "other org": "404 404 404 404 404", "organisation key": "404 404 404 404 404",
		"Caddyfile key": "ok 409 409 409 secret", "virtual key": "ok ok ok ok secret", "other org's vk": "404 404 404 404 404",
		"Caddyfile config": "ok 409 409 409 secret", "other org's config": "404 404 404 404 404",
	},
}

func outcome(d *Denial) string {
	if d == nil {
		return "ok"
	}
	switch d.Code {
	case "missing_scope":
		return "scope"
	case "key_beyond_reach":
		return "beyond"
	case "self_change_forbidden":
		return "self"
	case "credentials_not_disclosed":
		return "secret"
	case "declared_in_caddyfile":
		return "409"
	case "":
		return fmt.Sprint(d.Status)
	}
	return d.Code
}

func TestAuthorizeTable(t *testing.T) {
	for an, want := range authzWant {
		a := authzActors[an]
		if len(want) != len(authzTargets) {
			t.Fatalf("%s: %d targets in the table, want %d", an, len(want), len(authzTargets))
		}
		for tn, mk := range authzTargets {
			outs := strings.Fields(want[tn])
			for i, act := range authzActions {
				t.Run(an+"/"+tn+"/"+string(act), func(t *testing.T) {
					tg := mk(a)
					if act == ActionUpdate {
						tg.Changed = []string{"usage_limits"}
					}
					if got := outcome(Authorize(a, act, tg)); got != outs[i] {
						t.Fatalf("got %s, want %s", got, outs[i])
					}
				})
			}
		}
	}
	// Own-key updates of what is not a limit pass.
	for an, a := range authzActors {
		tg := authzTargets["own"](a)
		tg.Changed = []string{"description"}
		if d := Authorize(a, ActionUpdate, tg); d != nil && d.Code != "missing_scope" {
			t.Errorf("%s: a description change of its own key: %v", an, d)
		}
	}
}

// TestAuthorizeCreateAndNext: the grant of a key minted (create) or as an
// update leaves it (Next) never goes beyond the actor's.
func TestAuthorizeCreateAndNext(t *testing.T) {
	models := authzActors["model-restricted"]
	admin := authzActors["workspace admin"]
	star := authzActors["org *"]
	for _, tc := range []struct {
		name  string
		actor *Actor
		t     *Target
		want  string
	}{
		{"every model from a restricted key", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, UsageLimits: limit(5, "monthly")}), "allowed_models_beyond_reach"},
		{"another model", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"o3"}, UsageLimits: limit(5, "monthly")}), "allowed_models_beyond_reach"},
		{"a wider pattern", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-*"}, UsageLimits: limit(5, "monthly")}), "allowed_models_beyond_reach"},
		{"one of its models", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o-mini", "gpt-4o-mini*"}, UsageLimits: limit(5, "monthly")}), "ok"},
		{"no usage limit from a limited key", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o"}}), "usage_limits_beyond_reach"},
		{"a higher usage limit", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o"}, UsageLimits: limit(20, "monthly")}), "usage_limits_beyond_reach"},
		{"a limit resetting more often", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o"}, UsageLimits: limit(5, "weekly")}), "usage_limits_beyond_reach"},
		{"a limit the gateway would not enforce", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o"}, UsageLimits: json.RawMessage(`{"credit_limit":5,"alert_threshold":50}`)}), "usage_limits_beyond_reach"},
		{"a limit that never resets", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o"}, UsageLimits: limit(5, "none")}), "ok"},
		{"a scope not held", models, apiKeyTarget("", orgA, ws1, Grant{Scopes: []string{"*"}, AllowedModels: []string{"gpt-4o"}, UsageLimits: limit(5, "")}), "scope"},
		{"an organisation key from a workspace key", admin, apiKeyTarget("", orgA, ws1, Grant{Organisation: true, Scopes: []string{"api_keys.read"}}), "workspace_forbidden"},
		{"in another workspace", admin, apiKeyTarget("", orgA, ws2, Grant{Scopes: []string{"api_keys.read"}}), "workspace_forbidden"},
		{"in another organisation's workspace", star, apiKeyTarget("", orgB, ws2, Grant{Scopes: []string{"api_keys.read"}}), "workspace_forbidden"},
		{"organisation key in another workspace", star, apiKeyTarget("", orgA, ws2, Grant{Organisation: true, Scopes: []string{"*"}}), "ok"},
		{"a Caddyfile key's name", star, func() *Target {
			t := apiKeyTarget("admin", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}})
			t.Source = SourceConfig
			return t
		}(), "409"},
	} {
		t.Run("create/"+tc.name, func(t *testing.T) {
			tc.t.Named = true
			if got := outcome(Authorize(tc.actor, ActionCreate, tc.t)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	// An update whose result goes beyond: a child of the restricted key
	// widened to every model.
	child := apiKeyTarget("k-child", orgA, ws1, Grant{Scopes: []string{"api_keys.read"}, AllowedModels: []string{"gpt-4o"}, UsageLimits: limit(5, "")})
	child.Next = &Grant{Scopes: []string{"api_keys.read"}, UsageLimits: limit(5, "")}
	child.Changed = []string{"allowed_models"}
	if got := outcome(Authorize(models, ActionUpdate, child)); got != "allowed_models_beyond_reach" {
		t.Fatalf("widening a child: %s", got)
	}
	// Lists: a named workspace out of reach is a 403, a whole
	// organisation is an organisation key's.
	for _, tc := range []struct {
		actor  *Actor
		org, w string
		want   string
	}{
		{admin, orgA, ws1, "ok"}, {admin, orgA, ws2, "workspace_forbidden"}, {admin, orgA, "", "workspace_forbidden"},
		{star, orgA, "", "ok"}, {star, orgA, ws2, "ok"}, {star, orgB, ws2, "workspace_forbidden"},
	} {
		got := outcome(Authorize(tc.actor, ActionList, &Target{Kind: KindVirtualKey, OrganisationID: tc.org, WorkspaceID: tc.w, Named: true}))
		if got != tc.want {
			t.Errorf("list %s/%s by %s: %s, want %s", tc.org, tc.w, tc.actor.KeyID, got, tc.want)
		}
	}
}

func TestModelsCover(t *testing.T) {
	for _, tc := range []struct {
		parent, child []string
		want          bool
	}{
		{nil, nil, true},
		{nil, []string{"o3"}, true},
		{[]string{"gpt-4o*"}, nil, false},
		{[]string{"gpt-4o*"}, []string{"gpt-4o"}, true},
		{[]string{"gpt-4o*"}, []string{"gpt-4o-mini*"}, true},
		{[]string{"gpt-4o*"}, []string{"gpt-4o*"}, true},
		{[]string{"gpt-4o*"}, []string{"gpt-*"}, false},
		{[]string{"gpt-4o*"}, []string{"gpt-4o?"}, true},
		{[]string{"gpt-4o*"}, []string{"gpt-4o/*"}, false},
		{[]string{"gpt-?"}, []string{"gpt-*"}, false},
		{[]string{"*"}, []string{"meta/llama"}, false},
		{[]string{"*"}, []string{"o3"}, true},
		{[]string{"gpt-4o", "o3"}, []string{"o3", "gpt-4o"}, true},
		{[]string{"gpt-4o"}, []string{"gpt-4o", "o1"}, false},
		{[]string{"gpt-4o*"}, []string{"gpt-4o[a-z]"}, false},
	} {
		if got := ModelsCover(tc.parent, tc.child); got != tc.want {
			t.Errorf("ModelsCover(%v, %v) = %v", tc.parent, tc.child, got)
		}
	}
}
