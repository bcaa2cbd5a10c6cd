package prompts

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Selector says which version of a prompt a reference names.
type Selector struct {
	// Latest selects the newest version ("@latest").
	Latest bool
	// Number selects a version by number ("@<n>"); 0 with Latest false
	// means the published version (no suffix).
	Number int
}

// ParseRef splits a prompt reference (a promptId): "<id or
// slug>" for the published version, "<id or slug>@latest" for the newest
// and "<id or slug>@<n>" for version n (a positive decimal integer). Any
// other suffix, including Portkey's environment labels such as
// @production, is a 400.
func ParseRef(ref string) (idOrSlug string, sel Selector, err error) {
	name, suffix, has := strings.Cut(ref, "@")
	if name == "" {
		return "", sel, apierror.BadRequest("promptId", "the prompt id is empty")
	}
	if !has {
		return name, sel, nil
	}
	if suffix == "latest" {
		return name, Selector{Latest: true}, nil
	}
	if n, ok := positiveInt(suffix); ok {
		return name, Selector{Number: n}, nil
	}
	return "", sel, apierror.BadRequest("promptId", "invalid version suffix %q in %q: use no suffix (the published version), @latest or @<version number>", "@"+suffix, ref).WithCode("invalid_prompt_version")
}

// positiveInt parses digits only: no sign, no spaces, no zero.
func positiveInt(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(s)
	return n, n > 0
}

// Pick returns the version sel names, or a 404 that says what is missing.
func Pick(p *Prompt, sel Selector) (*Version, error) {
	switch {
	case sel.Latest:
		return p.Latest(), nil
	case sel.Number > 0:
		if v := p.Version(sel.Number); v != nil {
			return v, nil
		}
		return nil, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "prompt %q has no version %d (it has %d)", p.Slug, sel.Number, len(p.Versions)).WithCode("prompt_version_not_found")
	}
	if v := p.PublishedVersion(); v != nil {
		return v, nil
	}
	return nil, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "prompt %q has no published version: publish one, or call it with @latest or @<version number>", p.Slug).WithCode("prompt_not_published")
}

// Resolve finds the prompt and version a promptId names for a workspace,
// with ParseRef's suffix rules. It never does storage I/O
// unless the registry's snapshot is due for a reload. Errors are
// *apierror.Error: 400 for a bad suffix, 404 for an unknown prompt or
// version or an unpublished prompt called bare, 503 when the store cannot
// be read.
func Resolve(ctx context.Context, r *Registry, workspaceID, promptRef string) (*Prompt, *Version, error) {
	idOrSlug, sel, err := ParseRef(promptRef)
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		return nil, nil, notFound(idOrSlug)
	}
	p, err := r.Lookup(ctx, workspaceID, idOrSlug)
	if err != nil {
		return nil, nil, err
	}
	v, err := Pick(p, sel)
	if err != nil {
		return nil, nil, err
	}
	return p, v, nil
}

// CompletionsRef reports whether path (with its /v1 prefix) is a prompt
// completions call, POST /v1/prompts/{promptId}/completions, and returns
// its promptId. The inference pipeline serves these, not the prompt API,
// although they lie under the prompt API's path prefix; whatever else
// skips /v1/prompts/* as control plane (rate-limit admission) should ask
// this first.
func CompletionsRef(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/prompts/")
	if !ok {
		return "", false
	}
	ref, ok := strings.CutSuffix(rest, "/completions")
	if !ok || ref == "" || strings.Contains(ref, "/") {
		return "", false
	}
	return ref, true
}
