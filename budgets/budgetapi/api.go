// Package budgetapi serves the usage limits (budgets) at
// /v1/policies/usage-limits in the reference's shape. A key needs the
// usage_limits scope of each action (Scope*), and sees and changes only
// its own workspace's limits (an organisation key: its organisation's,
// naming the workspace in the body). Every change is in the audit log
// (GET /v1/audit-logs) as usage_limit.create, .update or .delete.
package budgetapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

const (
	owned      = "/v1/policies/"
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

func init() {
	controlplane.Handle("POST "+collection, owned, handle(ScopeCreate, create))
	controlplane.Handle("GET "+collection, owned, handle(ScopeList, list))
	controlplane.Handle("GET "+item, owned, handle(ScopeRead, get))
	controlplane.Handle("PUT "+item, owned, handle(ScopeUpdate, update))
	controlplane.Handle("DELETE "+item, owned, handle(ScopeDelete, remove))
}

type call struct {
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

// audit records a change to u in the audit log (app.Audit).
func (c *call) audit(verb string, u *budgets.UsageLimit, fields []string) {
	c.app.Audit(c.r.Context(), c.id, "usage_limit."+verb, "usage_limit", u.ID, u.WorkspaceID, u.OrganisationID, fields)
}

// handle serves fn to a caller holding scope: a key without it gets a
// 403 before anything is read or changed.
func handle(scope string, fn func(*call) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cp := controlplane.From(r)
		if cp == nil || cp.Identity == nil || cp.App.BudgetStore() == nil {
			apierror.Write(w, apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "a gateway API key is required"))
			return
		}
		if !cp.Identity.Can(scope) {
			apierror.Write(w, controlplane.MissingScope(scope))
			return
		}
		v, err := fn(&call{r: r, id: cp.Identity, app: cp.App, store: cp.App.BudgetStore(), body: cp.Body})
		if err != nil {
			writeErr(w, err)
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}

func writeErr(w http.ResponseWriter, err error) {
	var (
		fe *policies.FieldError
		ae *apierror.Error
	)
	switch {
	case errors.As(err, &ae):
		apierror.Write(w, ae)
	case errors.As(err, &fe):
		apierror.Write(w, apierror.BadRequest(fe.Field, "%s", fe.Error()))
	case errors.Is(err, budgets.ErrNotFound):
		apierror.Write(w, apierror.New(http.StatusNotFound, apierror.TypeNotFound, "no such usage limit").WithCode("policy_not_found"))
	case errors.Is(err, budgets.ErrTooMany):
		apierror.Write(w, apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "too many usage limits (at most 1000)"))
	default:
		caddy.Log().Named("llm.budgets").Error("usage limit store failed", zap.Error(err))
		apierror.Write(w, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the usage limit store is unavailable; try again later"))
	}
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
	case u.WorkspaceID == id.WorkspaceID, id.Type == keys.TypeOrganisation:
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
	ws := c.id.WorkspaceID
	named := c.r.URL.Query().Get("workspace_id")
	switch {
	case c.id.Type == keys.TypeOrganisation:
		ws = named
	case named != "" && named != ws:
		return nil, apierror.Newf(http.StatusForbidden, apierror.TypeInvalidRequest,
			"workspace_id %s is not this gateway key's workspace", apierror.QuoteID(named)).WithCode("workspace_forbidden")
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
