// Package promptapi serves the prompt management and render API under
// /v1/prompts through the gateway's control plane, in the shapes the
// portkey-ai SDK (3.x) sends and reads, so that SDK manages the gateway's
// prompts unchanged. It is the llm.api.prompts module; the rules live in
// package prompts. Every route is scoped to the caller's workspace (the
// gateway key's), and a prompt is named by its id or its slug.
//
// Prompt completions (POST /v1/prompts/{promptId}/completions) go through
// the inference pipeline, not here.
package promptapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// Scopes of the prompt API, named resource.action as the other
// management APIs name theirs ("prompts.*" grants them all, prompts.read
// also prompts.list). Publishing a version (makeDefault) changes what
// every caller of the prompt gets, so it has a scope of its own. Prompt
// completions are inference and need none.
const (
	ScopeCreate  = "prompts.create"
	ScopeRead    = "prompts.read"
	ScopeList    = "prompts.list"
	ScopeUpdate  = "prompts.update"
	ScopeDelete  = "prompts.delete"
	ScopePublish = "prompts.publish"
	ScopeRender  = "prompts.render"
)

func init() { caddy.RegisterModule(Module{}) }

// Module is the llm.api.prompts module: the prompt management and render
// API.
type Module struct {
	app *app.App
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".prompts", New: func() caddy.Module { return new(Module) }}
}

// Provision takes the llm app, whose prompt registry the routes serve.
func (m *Module) Provision(ctx caddy.Context) error {
	a, err := app.Get(ctx)
	m.app = a
	return err
}

// Routes implements controlplane.Module.
func (m *Module) Routes() []controlplane.Route {
	routes := []struct {
		method, path, scope string
		fn                  func(*call) (any, error)
	}{
		{"POST", "/v1/prompts", ScopeCreate, create},
		{"GET", "/v1/prompts", ScopeList, list},
		{"GET", "/v1/prompts/{id}", ScopeRead, retrieve},
		{"PUT", "/v1/prompts/{id}", ScopeUpdate, update},
		{"DELETE", "/v1/prompts/{id}", ScopeDelete, remove},
		{"PUT", "/v1/prompts/{id}/makeDefault", ScopePublish, publish},
		{"GET", "/v1/prompts/{id}/versions", ScopeList, listVersions},
		{"GET", "/v1/prompts/{id}/versions/{version}", ScopeRead, retrieveVersion},
		{"PUT", "/v1/prompts/{id}/versions/{version}", ScopeUpdate, updateVersion},
		{"POST", "/v1/prompts/{id}/render", ScopeRender, render},
	}
	out := make([]controlplane.Route, len(routes))
	for i, r := range routes {
		out[i] = controlplane.Route{Method: r.method, Path: r.path, Scope: r.scope, Handler: m.handle(r.fn)}
	}
	return out
}

// call is one API request: who asks, in which workspace, with what body.
type call struct {
	r         *http.Request
	reg       *prompts.Registry
	workspace string
	body      []byte
}

// handle adapts a route function to the control plane.
func (m *Module) handle(fn func(c *call) (any, error)) controlplane.Handler {
	return func(cp *controlplane.Call) (any, error) {
		reg := m.app.PromptRegistry()
		if reg == nil {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the prompt library is unavailable")
		}
		return fn(&call{r: cp.Request, reg: reg, workspace: cp.Caller.WorkspaceID, body: cp.Body})
	}
}

// empty is the body of the routes Portkey answers with {}.
type empty struct{}

// create: POST /v1/prompts → {id, slug, version_id, object}. name and
// string are required; the first version is published.
func create(c *call) (any, error) {
	var b promptBody
	if err := decodeBody(c.body, &b); err != nil {
		return nil, err
	}
	if err := c.checkWorkspace(b.WorkspaceID); err != nil {
		return nil, err
	}
	if b.Name == nil || strings.TrimSpace(*b.Name) == "" {
		return nil, apierror.BadRequest("name", "name is required")
	}
	if b.String == nil {
		return nil, apierror.BadRequest("string", "string is required: the template, a JSON array of chat messages serialised as a string")
	}
	v := new(prompts.Version)
	if err := b.applyTo(v); err != nil {
		return nil, err
	}
	p, err := c.reg.Create(c.r.Context(), c.workspace, prompts.NewPrompt{Name: *b.Name, CollectionID: deref(b.CollectionID), Version: v})
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": p.ID, "slug": p.Slug, "version_id": p.Versions[0].ID, "object": "prompt"}, nil
}

// list: GET /v1/prompts?collection_id=&search=&current_page=&page_size=
// → {object: list, total, data}. current_page counts from 0, as the SDK
// sends it; page_size defaults to 100 and is at most 1000.
func list(c *call) (any, error) {
	q := c.r.URL.Query()
	if err := c.checkWorkspace(optionalQuery(q.Get("workspace_id"))); err != nil {
		return nil, err
	}
	page, err := queryInt(q.Get("current_page"), "current_page", 0, 0)
	if err != nil {
		return nil, err
	}
	size, err := queryInt(q.Get("page_size"), "page_size", 100, 1)
	if err != nil {
		return nil, err
	}
	size = min(size, 1000)
	all, err := c.reg.List(c.r.Context(), c.workspace)
	if err != nil {
		return nil, err
	}
	collection, search := q.Get("collection_id"), strings.ToLower(q.Get("search"))
	items := make([]listItem, 0, len(all))
	for _, p := range all {
		if collection != "" && p.CollectionID != collection {
			continue
		}
		if search != "" && !strings.Contains(strings.ToLower(p.Name), search) && !strings.Contains(p.Slug, search) {
			continue
		}
		items = append(items, viewListItem(p))
	}
	total := len(items)
	start := min(page*size, total)
	return listResponse[listItem]{Object: "list", Total: total, Data: items[start:min(start+size, total)]}, nil
}

// retrieve: GET /v1/prompts/{id} → the prompt with its published version
// flattened in (the latest version when none is published).
func retrieve(c *call) (any, error) {
	p, err := c.reg.Lookup(c.r.Context(), c.workspace, c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	v := p.PublishedVersion()
	if v == nil {
		v = p.Latest()
	}
	return viewPrompt(p, v), nil
}

// update: PUT /v1/prompts/{id} → {id, slug, prompt_version_id, object}.
// Any version field creates a new, unpublished version from the latest
// one with the given fields replaced (the SDK sends only what changes);
// name and collection_id change the prompt itself.
func update(c *call) (any, error) {
	var b promptBody
	if err := decodeBody(c.body, &b); err != nil {
		return nil, err
	}
	if err := c.checkWorkspace(b.WorkspaceID); err != nil {
		return nil, err
	}
	u := prompts.Update{Name: b.Name, CollectionID: b.CollectionID}
	if b.touchesVersion() {
		u.NewVersion = func(latest prompts.Version) (*prompts.Version, error) {
			if err := b.applyTo(&latest); err != nil {
				return nil, err
			}
			return &latest, nil
		}
	}
	p, added, err := c.reg.Update(c.r.Context(), c.workspace, c.r.PathValue("id"), u)
	if err != nil {
		return nil, err
	}
	if added == nil {
		added = p.Latest()
	}
	return map[string]string{"id": p.ID, "slug": p.Slug, "prompt_version_id": added.ID, "object": "prompt"}, nil
}

// remove: DELETE /v1/prompts/{id} → {}.
func remove(c *call) (any, error) {
	if err := c.reg.Delete(c.r.Context(), c.workspace, c.r.PathValue("id")); err != nil {
		return nil, err
	}
	return empty{}, nil
}

// publish: PUT /v1/prompts/{id}/makeDefault {version} → {}.
func publish(c *call) (any, error) {
	var b struct {
		Version json.Number `json:"version"`
	}
	if err := decodeBody(c.body, &b); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(b.Version.String())
	if err != nil || n < 1 {
		return nil, apierror.BadRequest("version", "version is required: the number of the version to publish")
	}
	if _, err := c.reg.Publish(c.r.Context(), c.workspace, c.r.PathValue("id"), n); err != nil {
		return nil, err
	}
	return empty{}, nil
}

// listVersions: GET /v1/prompts/{id}/versions → {object: list, total,
// data}, oldest first.
func listVersions(c *call) (any, error) {
	p, err := c.reg.Lookup(c.r.Context(), c.workspace, c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	items := make([]versionItem, len(p.Versions))
	for i, v := range p.Versions {
		items[i] = viewVersion(p, v)
	}
	return listResponse[versionItem]{Object: "list", Total: len(items), Data: items}, nil
}

// retrieveVersion: GET /v1/prompts/{id}/versions/{version} → the prompt
// with that version flattened in. version is the version's id or number.
func retrieveVersion(c *call) (any, error) {
	p, err := c.reg.Lookup(c.r.Context(), c.workspace, c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	v, err := prompts.FindVersion(p, c.r.PathValue("version"))
	if err != nil {
		return nil, err
	}
	return viewPrompt(p, v), nil
}

// updateVersion: PUT /v1/prompts/{id}/versions/{version} → {}. Only the
// description, template_metadata and label_id change: a version's
// template and settings are immutable.
func updateVersion(c *call) (any, error) {
	var b versionBody
	if err := decodeBody(c.body, &b); err != nil {
		return nil, err
	}
	m, err := b.meta()
	if err != nil {
		return nil, err
	}
	if _, _, err := c.reg.UpdateVersion(c.r.Context(), c.workspace, c.r.PathValue("id"), c.r.PathValue("version"), m); err != nil {
		return nil, err
	}
	return empty{}, nil
}

// render: POST /v1/prompts/{promptId}/render → {success: true, data}, data
// being a chat-completion request body (see prompts.RenderRequest).
func render(c *call) (any, error) {
	p, v, err := prompts.Resolve(c.r.Context(), c.reg, c.workspace, c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	data, err := prompts.RenderRequest(p, v, c.body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(data)+32)
	out = append(out, `{"success":true,"data":`...)
	out = append(out, data...)
	return json.RawMessage(append(out, "}\n"...)), nil
}

// checkWorkspace refuses a workspace_id other than the caller's: a gateway
// key manages only its own workspace's prompts.
func (c *call) checkWorkspace(ws *string) error {
	if ws == nil || *ws == "" || *ws == c.workspace {
		return nil
	}
	return apierror.Newf(http.StatusForbidden, apierror.TypeInvalidRequest, "workspace_id %q is not this gateway key's workspace", *ws).WithCode("workspace_forbidden")
}

func optionalQuery(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func queryInt(s, name string, def, minimum int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < minimum {
		return 0, apierror.BadRequest(name, "%s must be an integer of at least %d", name, minimum)
	}
	return n, nil
}
