package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// PromptsConfig configures the prompt library.
type PromptsConfig struct {
	// Dir holds prompt files, one JSON file per prompt with all its
	// versions (see package prompts). They are read at every config load,
	// so a reload picks up edits; an invalid file fails the load. Prompts
	// created through the API are kept in Redis when the app has one, else
	// in Caddy's storage, whether or not Dir is set.
	Dir string `json:"dir,omitempty"`

	registry *prompts.Registry
}

// provisionPrompts loads the prompt files and opens the prompt store. It
// runs after provisionShared, which sets up storage and Redis.
func (a *App) provisionPrompts(ctx caddy.Context) error {
	if a.Prompts == nil {
		a.Prompts = new(PromptsConfig)
	}
	var files []*prompts.Prompt
	if a.Prompts.Dir != "" {
		dir := caddy.NewReplacer().ReplaceAll(a.Prompts.Dir, "")
		var err error
		if files, err = prompts.LoadDir(dir); err != nil {
			return err
		}
	}
	// The models of prompt files keep their own metric label.
	var models []string
	for _, p := range files {
		for _, v := range p.Versions {
			models = append(models, v.Model)
		}
	}
	observe.AllowModels(models...)
	var store prompts.Store = prompts.NewStorageStore(a.records, "")
	var ttl time.Duration
	switch {
	case a.recordsRedis:
		store = prompts.NewRedisStore(a.redis, promptsNamespace(a.RedisKeyPrefix()))
	case a.recordsSQL != nil:
		ttl = recordsPollTTL
	}
	logger := ctx.Logger().Named("prompts")
	reg, err := prompts.NewRegistry(files, prompts.Options{
		Store:        store,
		CacheTTL:     ttl,
		CheckTarget:  a.checkPromptTarget,
		OnStoreError: func(err error) { logger.Error("prompt store", zap.Error(err)) },
	})
	if err != nil {
		return err
	}
	a.Prompts.registry = reg
	if len(files) > 0 {
		logger.Info("loaded prompt files", zap.String("dir", a.Prompts.Dir), zap.Int("prompts", len(files)))
	}
	return nil
}

// checkPromptTarget makes a prompt version name only a virtual key, saved
// config or provider this gateway knows.
func (a *App) checkPromptTarget(t *prompts.Target) error {
	switch {
	case t.VirtualKey != "":
		if _, ok := a.virtualKeys[t.VirtualKey]; !ok {
			return fmt.Errorf("virtual_key: unknown virtual key %q", t.VirtualKey)
		}
	case t.ConfigID != "":
		if _, ok := a.configs[t.ConfigID]; !ok {
			return fmt.Errorf("config_id: unknown saved config %q", t.ConfigID)
		}
	case t.Provider != "":
		if _, ok := providers.Lookup(strings.ToLower(t.Provider)); !ok {
			return fmt.Errorf("provider: unknown provider %q", t.Provider)
		}
	}
	return nil
}

// PromptRegistry returns the prompt library: file prompts and API prompts.
// Pass it to prompts.Resolve.
func (a *App) PromptRegistry() *prompts.Registry {
	if a.Prompts == nil {
		return nil
	}
	return a.Prompts.registry
}

// PromptTarget implements routing.PromptResolver: the target saved with
// the prompt version ref names, in workspace.
func (a *App) PromptTarget(ctx context.Context, workspace, ref string) (routing.PromptTarget, error) {
	_, v, err := prompts.Resolve(ctx, a.PromptRegistry(), workspace, ref)
	if err != nil {
		return routing.PromptTarget{}, err
	}
	pt := routing.PromptTarget{VirtualKey: v.Target.VirtualKey}
	if pt.VirtualKey == "" && v.Target.Provider != "" {
		pt.Settings = v.Target.ConfigObject()
	}
	return pt, nil
}
