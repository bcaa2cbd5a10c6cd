package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// controlPlaneState adds "api", the management API modules, and the
// router serving them (package controlplane).
type controlPlaneState struct {
	// API are the management API modules to load (namespace llm.api:
	// keys, usage_limits, ledger, prompts, rate_limits, feedback), each
	// with its own settings. Left out: every such module registered.
	API caddy.ModuleMap `json:"api,omitempty" caddy:"namespace=llm.api"`

	router *controlplane.Router
}

// provisionControlPlane loads the API modules and builds this config's
// router. It runs last: a module's Provision takes from the app what it
// serves (stores, registries), which must exist by then.
func (a *App) provisionControlPlane(ctx caddy.Context) error {
	var mods []controlplane.Module
	add := func(name string, v any) error {
		m, ok := v.(controlplane.Module)
		if !ok {
			return fmt.Errorf("api: module %s is not a management API module", name)
		}
		mods = append(mods, m)
		return nil
	}
	if len(a.API) > 0 {
		loaded, err := ctx.LoadModule(a, "API")
		if err != nil {
			return fmt.Errorf("loading management API modules: %v", err)
		}
		for name, v := range loaded.(map[string]any) {
			if err := add(name, v); err != nil {
				return err
			}
		}
	} else {
		for _, info := range caddy.GetModules(controlplane.Namespace) {
			v, err := ctx.LoadModuleByID(string(info.ID), nil)
			if err != nil {
				return fmt.Errorf("loading management API module %s: %v", info.ID, err)
			}
			if err := add(string(info.ID), v); err != nil {
				return err
			}
		}
	}
	// A registered module left out is still claimed: its paths are a
	// 404, never a provider's call. Its routes are read from a fresh
	// value, not provisioned.
	var notLoaded []string
	for _, info := range caddy.GetModules(controlplane.Namespace) {
		if _, loaded := a.API[info.ID.Name()]; len(a.API) == 0 || loaded {
			continue
		}
		if m, ok := info.New().(controlplane.Module); ok {
			for _, p := range controlplane.Prefixes(m.Routes()) {
				if !slices.Contains(notLoaded, p) {
					notLoaded = append(notLoaded, p)
				}
			}
		}
	}
	// One order whatever the map's: a duplicate route names the same
	// modules on every load.
	sort.Slice(mods, func(i, j int) bool { return mods[i].CaddyModule().ID < mods[j].CaddyModule().ID })
	rt, err := controlplane.Build(mods, controlplane.Options{NotLoaded: notLoaded, Auditor: a, Workspaces: a, Logger: a.logger.Named("api")})
	if err != nil {
		return err
	}
	a.router = rt
	return nil
}

// ControlPlane is the router of this config's management API; its Owns is
// the one decision of what a management path is.
func (a *App) ControlPlane() *controlplane.Router { return a.router }

// ForeignOrganisation is the organisation other than own that holds
// workspace ws: that of a Caddyfile key in it, else of a stored API key,
// virtual key or config of another organisation in it (the key store's
// index: one map read, whatever the number of records); ok false when
// none does, and the workspace is own's to use (controlplane.Workspaces,
// the tenancy rule's question).
func (a *App) ForeignOrganisation(ws, own string) (string, bool) {
	for _, k := range a.keys {
		if k.id.WorkspaceID == ws {
			return k.id.OrganisationID, k.id.OrganisationID != own
		}
	}
	if s := a.keyStore; s != nil {
		return s.ForeignOrganisation(ws, own)
	}
	return "", false
}

// CheckVirtualKey is the package's CheckVirtualKey, as a method, for the
// API modules that take the app as an interface of their own.
func (*App) CheckVirtualKey(s *providers.Settings) error { return CheckVirtualKey(s) }

// Get is the llm app of ctx's config, for the modules it loads (an API
// module provisions while the app does; the app is already known to the
// config then, so this returns it rather than loading another).
func Get(ctx caddy.Context) (*App, error) {
	v, err := ctx.App(ID)
	if err != nil {
		return nil, err
	}
	a, ok := v.(*App)
	if !ok {
		return nil, fmt.Errorf("app %s is %T, not the llm app", ID, v)
	}
	return a, nil
}

// unmarshalAPI parses `api <module>...`: the management API modules to
// load, by the last part of their ID (keys, usage_limits, ledger,
// prompts, rate_limits, feedback); it may repeat.
func (a *App) unmarshalAPI(d *caddyfile.Dispenser) error {
	names := d.RemainingArgs()
	if len(names) == 0 {
		return d.ArgErr()
	}
	if a.API == nil {
		a.API = caddy.ModuleMap{}
	}
	for _, n := range names {
		if _, err := caddy.GetModule(controlplane.Namespace + "." + n); err != nil {
			return d.Errf("api: unknown management API module %q", n)
		}
		a.API[n] = json.RawMessage("{}")
	}
	return nil
}
