package app

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// costCatalog adds the price catalog to the app.
type costCatalog struct {
	// PriceCatalog is a file of model prices in LiteLLM's
	// model_prices_and_context_window.json format, overriding and
	// extending the built-in catalog. It is read on every config load, so
	// a reload picks up a changed file.
	PriceCatalog string `json:"price_catalog,omitempty"`

	catalog *cost.Catalog
}

// provisionCost loads the price catalog and declares the configured
// workspaces as metric label values.
func (a *App) provisionCost() error {
	ws := make([]string, 0, len(a.keys))
	for _, k := range a.keys {
		ws = append(ws, k.id.WorkspaceID)
	}
	observe.SetConfiguredWorkspaces(ws)
	a.catalog = cost.Builtin()
	if a.PriceCatalog == "" {
		return nil
	}
	path := caddy.NewReplacer().ReplaceAll(a.PriceCatalog, "")
	c, err := cost.Load(path)
	if err != nil {
		return fmt.Errorf("price_catalog: %v", err)
	}
	a.catalog = c
	return nil
}

// Prices returns the price catalog in use: the built-in one, with the
// operator's file merged over it when price_catalog is set.
func (a *App) Prices() *cost.Catalog {
	if a == nil || a.catalog == nil {
		return cost.Builtin()
	}
	return a.catalog
}
