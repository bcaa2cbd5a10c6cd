// Package budgetapi serves the usage limits (budgets) at
// /v1/policies/usage-limits in the reference's shape. A key needs the
// usage_limits scope of each action (Scope*), and sees and changes only
// its own workspace's limits (an organisation key: its organisation's,
// naming the workspace in the body). Every change is in the audit log
// (GET /v1/audit-logs) as usage_limit.create, .update or .delete.
package budgetapi

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

const (
	collection = "/v1/policies/usage-limits"
	item       = collection + "/{id}"
)

// Scopes of the usage-limits API, named resource.action as the keys,
// virtual keys and configs APIs name theirs ("usage_limits.*" grants them
// all, and usage_limits.read grants usage_limits.list too). A Caddyfile
// key without scopes holds them all, in its own workspace.
const (
	ScopeCreate = "usage_limits.create"
	ScopeRead   = "usage_limits.read"
	ScopeList   = "usage_limits.list"
	ScopeUpdate = "usage_limits.update"
	ScopeDelete = "usage_limits.delete"
)

func init() { caddy.RegisterModule(Module{}) }

// Module is the llm.api.usage_limits module: the usage-limit API and its
// spend report.
type Module struct {
	app *app.App
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".usage_limits", New: func() caddy.Module { return new(Module) }}
}

// Provision takes the llm app, whose budget store the routes serve.
func (m *Module) Provision(ctx caddy.Context) error {
	a, err := app.Get(ctx)
	m.app = a
	return err
}

// Routes implements controlplane.Module.
func (m *Module) Routes() []controlplane.Route {
	return []controlplane.Route{
		{Method: http.MethodPost, Path: collection, Scope: ScopeCreate, Handler: m.handle(create)},
		{Method: http.MethodGet, Path: collection, Scope: ScopeList, Handler: m.handle(list)},
		{Method: http.MethodGet, Path: item, Scope: ScopeRead, Handler: m.handle(get)},
		{Method: http.MethodPut, Path: item, Scope: ScopeUpdate, Handler: m.handle(update)},
		{Method: http.MethodDelete, Path: item, Scope: ScopeDelete, Handler: m.handle(remove)},
		{Method: http.MethodGet, Path: usagePath, Scope: ScopeRead, Handler: m.handle(usage)},
	}
}

type call struct {
	*controlplane.Call
	r     *http.Request
	id    *identity.Caller
	app   *app.App
	store *budgets.Store
	body  []byte
}

// auditFields are the members of a usage limit the audit log names when
// they change.
var auditFields = []string{"name", "type", "credit_limit", "alert_threshold", "periodic_reset", "timezone",
	"conditions", "group_by", "status", "workspace_id"}

// audit records a change to u in the audit log.
func (c *call) audit(verb string, u *budgets.UsageLimit, fields []string) {
	c.Audit("usage_limit."+verb, "usage_limit", u.ID, u.WorkspaceID, u.OrganisationID, fields)
}

func (m *Module) handle(fn func(*call) (any, error)) controlplane.Handler {
	return func(cp *controlplane.Call) (any, error) {
		store := m.app.BudgetStore()
		if store == nil {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the usage limit store is unavailable; try again later")
		}
		return fn(&call{Call: cp, r: cp.Request, id: cp.Caller, app: m.app, store: store, body: cp.Body})
	}
}

// MapError implements controlplane.ErrorMapper.
func (*Module) MapError(err error) *apierror.Error {
	var fe *policies.FieldError
	switch {
	case errors.As(err, &fe):
		return apierror.BadRequest(fe.Field, "%s", fe.Error())
	case errors.Is(err, budgets.ErrNotFound):
		return apierror.New(http.StatusNotFound, apierror.TypeNotFound, "no such usage limit").WithCode("policy_not_found")
	case errors.Is(err, budgets.ErrTooMany):
		return apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "too many usage limits (at most 1000)")
	}
	return nil
}

// scope fills the limit's workspace and organisation from the key: a
// workspace key's own; an organisation key may name a workspace.
func (c *call) scope(u *budgets.UsageLimit) error {
	id := c.id
	switch u.OrganisationID {
	case "", id.OrganisationID:
		u.OrganisationID = id.OrganisationID
	default:
		return &policies.FieldError{Field: "organisation_id", Message: "must be the gateway key's organisation"}
	}
	switch {
	case u.WorkspaceID == "":
		u.WorkspaceID = id.WorkspaceID
	case u.WorkspaceID == id.WorkspaceID:
	case id.Type == keys.TypeOrganisation:
		// The tenancy rule: never a workspace of another organisation.
		_, err := c.Workspace(u.WorkspaceID)
		return err
	default:
		return &policies.FieldError{Field: "workspace_id", Message: "must be the gateway key's workspace"}
	}
	return nil
}

// visible reports whether the caller may see u.
func (c *call) visible(u *budgets.UsageLimit) bool {
	return keys.Manages(c.id, u.OrganisationID, u.WorkspaceID)
}

func create(c *call) (any, error) {
	u, err := budgets.Parse(c.body)
	if err != nil {
		return nil, err
	}
	u.ID, u.Status = "", ""
	if err := c.scope(u); err != nil {
		return nil, err
	}
	if err := u.Prepare(); err != nil {
		return nil, err
	}
	if err := c.store.Create(c.r.Context(), u); err != nil {
		return nil, err
	}
	c.audit("create", u, keys.ChangedFields(&budgets.UsageLimit{}, u, auditFields...))
	return map[string]string{"id": u.ID, "object": budgets.ObjectUsageLimits}, nil
}

// list answers the caller's workspace's limits; an organisation key's
// list is its organisation's, or one workspace's when ?workspace_id=
// names it. A workspace key naming another workspace is refused.
func list(c *call) (any, error) {
	named := c.r.URL.Query().Get("workspace_id")
	ws, err := c.Workspace(named)
	if err != nil {
		return nil, err
	}
	if named == "" && c.id.Type == keys.TypeOrganisation {
		ws = "" // the whole organisation
	}
	out, err := c.store.List(c.r.Context(), ws, c.id.OrganisationID)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []*budgets.UsageLimit{}
	}
	return map[string]any{"object": "list", "total": len(out), "data": out}, nil
}

func (c *call) lookup() (*budgets.UsageLimit, error) {
	u, err := c.store.Get(c.r.Context(), c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if !c.visible(u) {
		return nil, budgets.ErrNotFound
	}
	return u, nil
}

func get(c *call) (any, error) { return c.lookup() }

// update replaces the limit's settings; its id, scope and creation time
// stay. The counters are keyed by the limit's id and group_by, so a new
// credit_limit applies to what the period already spent, and a new
// group_by starts new counters.
func update(c *call) (any, error) {
	old, err := c.lookup()
	if err != nil {
		return nil, err
	}
	u, err := budgets.Parse(c.body)
	if err != nil {
		return nil, err
	}
	u.ID, u.WorkspaceID, u.OrganisationID, u.CreatedAt = old.ID, old.WorkspaceID, old.OrganisationID, old.CreatedAt
	if u.Status == "" {
		u.Status = old.Status
	}
	if u.Status != policies.StatusActive && u.Status != policies.StatusArchived {
		return nil, &policies.FieldError{Field: "status", Message: "must be active or archived"}
	}
	if err := u.Prepare(); err != nil {
		return nil, err
	}
	if err := c.store.Put(c.r.Context(), u); err != nil {
		return nil, err
	}
	c.audit("update", u, keys.ChangedFields(old, u, auditFields...))
	return map[string]string{"id": u.ID, "object": budgets.ObjectUsageLimits}, nil
}

func remove(c *call) (any, error) {
	u, err := c.lookup()
	if err != nil {
		return nil, err
	}
	if err := c.store.Delete(c.r.Context(), u.ID); err != nil {
		return nil, err
	}
	c.audit("delete", u, nil)
	return map[string]any{"id": u.ID, "object": budgets.ObjectUsageLimits, "deleted": true}, nil
}
