package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// ModelAlias maps a public model name to a routing configuration, so a
// client that can only name a model (a plain OpenAI SDK) gets a routing
// group: a request carrying no routing header (x-gateway-config,
// -virtual-key, -provider) whose model is the alias is routed by that
// configuration. Exactly one of Config and Inline is set.
type ModelAlias struct {
	// Config is the id of a saved config: one of the Caddyfile's, or one
	// saved through the configs API in the caller's workspace.
	Config string `json:"config,omitempty"`
	// Inline is a configuration object of the alias's own.
	Inline json.RawMessage `json:"inline,omitempty"`
}

// aliasConfigPrefix names the saved config an inline alias is kept as.
const aliasConfigPrefix = "model:"

// unmarshalModel reads
//
//	model <alias> {
//		config <saved config id | inline JSON object>
//	}
func (a *App) unmarshalModel(d *caddyfile.Dispenser) error {
	var alias string
	if !d.Args(&alias) || d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := a.Models[alias]; dup {
		return d.Errf("model %q: defined twice", alias)
	}
	m := new(ModelAlias)
	for d.NextBlock(1) {
		switch d.Val() {
		case "config":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			if strings.HasPrefix(strings.TrimSpace(v), "{") {
				if !json.Valid([]byte(v)) {
					return d.Errf("model %q: config is not a JSON object", alias)
				}
				m.Inline = json.RawMessage(v)
			} else {
				m.Config = v
			}
		default:
			return d.Errf("model %q: unknown option %q", alias, d.Val())
		}
	}
	if m.Config == "" && m.Inline == nil {
		return d.Errf("model %q: needs config <saved config id | inline JSON object>", alias)
	}
	if a.Models == nil {
		a.Models = map[string]*ModelAlias{}
	}
	a.Models[alias] = m
	return nil
}

// provisionModels checks the aliases once the saved configs are loaded:
// an inline configuration is checked as a saved config is and kept as
// one (model:<alias>, which x-gateway-config may also name); a named
// config must be the Caddyfile's unless configs can be saved through the
// API, where it is looked up in the caller's workspace per request.
func (a *App) provisionModels() error {
	a.aliases = make(map[string]string, len(a.Models))
	for alias, m := range a.Models {
		switch {
		case alias == "" || strings.ContainsAny(alias, " \t\r\n"):
			return fmt.Errorf("model %q: an alias is one word", alias)
		case (m.Config == "") == (m.Inline == nil):
			return fmt.Errorf("model %q: set exactly one of config and inline", alias)
		case m.Inline != nil:
			id := aliasConfigPrefix + alias
			if err := a.checkSavedConfig(m.Inline); err != nil {
				return fmt.Errorf("model %q: %v", alias, err)
			}
			if err := a.checkConfigHooks(m.Inline); err != nil {
				return fmt.Errorf("model %q: %v", alias, err)
			}
			a.configs[id] = m.Inline
			a.aliases[alias] = id
		default:
			if _, ok := a.configs[m.Config]; !ok && a.keyStore == nil {
				return fmt.Errorf("model %q: config %q is not defined", alias, m.Config)
			}
			a.aliases[alias] = m.Config
		}
	}
	return nil
}

// ModelAlias returns the saved config id the alias model routes by for
// caller id: the Caddyfile's aliases first (an operator's alias wins over
// one saved through the configs API), then the aliases of the active
// configs of the caller's workspace (keys.Config.Aliases), whose id is
// the config's slug, resolved in that workspace like x-gateway-config.
func (a *App) ModelAlias(id *identity.Caller, model string) (string, bool) {
	if c, ok := a.aliases[model]; ok {
		return c, true
	}
	if a.keyStore == nil || id == nil {
		return "", false
	}
	r, ok := a.keyStore.ConfigAlias(id.WorkspaceID, model)
	if !ok || r.OrganisationID != id.OrganisationID {
		return "", false
	}
	return r.Slug, true
}

// OperatorModelAlias reports whether the Caddyfile defines alias, which
// no config saved through the API may then claim.
func (a *App) OperatorModelAlias(alias string) bool {
	_, ok := a.aliases[alias]
	return ok
}

// ModelAliases returns every alias caller id may name, sorted: the
// Caddyfile's and those of its workspace's saved configs.
func (a *App) ModelAliases(id *identity.Caller) []string {
	out := make([]string, 0, len(a.aliases))
	for alias := range a.aliases {
		out = append(out, alias)
	}
	if a.keyStore != nil && id != nil {
		for _, alias := range a.keyStore.ConfigAliases(id.OrganisationID, id.WorkspaceID) {
			if _, shadowed := a.aliases[alias]; !shadowed {
				out = append(out, alias)
			}
		}
	}
	slices.Sort(out)
	return out
}
