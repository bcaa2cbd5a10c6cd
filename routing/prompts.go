package routing

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// PromptTarget is where a saved prompt version says it runs: a virtual
// key, or a provider with its where-to-reach settings (no credentials).
type PromptTarget struct {
	VirtualKey string
	// Settings is the provider settings object, when the version names a
	// provider rather than a virtual key.
	Settings json.RawMessage
}

// PromptResolver looks up a prompt's saved target within a workspace
// (prompts are scoped to workspaces, so the plan can name one only once
// the caller is known).
type PromptResolver interface {
	Resolver
	// PromptTarget returns the target saved with the prompt version ref
	// names, in workspace. Errors are *apierror.Error values.
	PromptTarget(ctx context.Context, workspace, ref string) (PromptTarget, error)
}

// ResolvePrompts completes a plan whose leaves name only a prompt_id: each
// gets the provider saved with that prompt's version (a virtual key, or a
// provider with its settings), so one config can route between prompts
// kept on different providers. A leaf's own settings and the request's
// headers were applied first and still win. Plans without such leaves
// cost one loop.
func (p *Plan) ResolvePrompts(ctx context.Context, r PromptResolver, workspace string, h *ingress.Headers) error {
	for _, t := range p.Leaves {
		if t.PromptID == "" || t.Settings.Provider != "" {
			continue
		}
		pt, err := r.PromptTarget(ctx, workspace, t.PromptID)
		if err != nil {
			return PromptTargetError(t, err)
		}
		var saved providers.Settings
		switch {
		case pt.VirtualKey != "":
			vk, ok := r.VirtualKey(pt.VirtualKey)
			if !ok {
				return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "%s.prompt_id: the prompt's virtual key %q is not configured", t.Path, pt.VirtualKey).WithCode("virtual_key_not_found")
			}
			saved = *vk
			// The virtual key's credential replaces the caller's token.
			if t.Settings.APIKey == h.Authorization {
				t.Settings.APIKey = ""
			}
			t.VirtualKey = pt.VirtualKey
		case len(pt.Settings) > 0:
			if err := json.Unmarshal(pt.Settings, &saved); err != nil {
				return apierror.BadRequest(t.Path+".prompt_id", "%s.prompt_id: the prompt's provider settings are invalid", t.Path)
			}
		default:
			return apierror.BadRequest(t.Path+".provider", "%s names no provider and its prompt saves none (or only a config id): set provider or virtual_key on the target, or send %s%s", t.Path, ingress.Prefix, ingress.Provider)
		}
		before := t.Settings
		t.Settings.Inherit(&saved)
		// A prompt's provider settings are client input (prompts are
		// written through the API), so an address they add is guarded
		// like an inline config's; a virtual key's is the operator's.
		if pt.VirtualKey == "" && !sameAddress(&before, &t.Settings) {
			t.GuardEgress = true
		}
		if err := CheckProvider(t); err != nil {
			return err
		}
	}
	return nil
}

// PromptTargetError names the target whose prompt failed, since a config
// may name several prompts.
func PromptTargetError(t *Target, err error) error {
	e := *apierror.As(err)
	e.Message = t.Path + ".prompt_id: " + e.Message
	return &e
}
