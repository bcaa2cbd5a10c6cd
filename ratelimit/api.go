package ratelimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// API paths. The collection is the spec's; the id routes beyond GET and
// the listing are this gateway's additions.
const (
	apiCollection = "/v1/policies/rate-limits"
	apiItem       = apiCollection + "/{id}"
	// apiUsage is where one group stands on one policy, apiUsageMine where
	// the caller stands on every policy its identity alone groups (usage.go).
	apiUsage     = apiItem + "/usage"
	apiUsageMine = apiCollection + "/usage"
	// pathParam is the spec's name of the id path parameter, used as the
	// "param" of a 400 about it.
	pathParam = "rateLimitsPolicyId"
)

// Listing bounds, the same as the batch listing's.
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

// Scopes of the rate-limit policy API, named resource.action as the keys
// and usage-limits APIs name theirs ("rate_limits.*" grants them all,
// rate_limits.read also rate_limits.list). A Caddyfile key without
// scopes holds them all, in its own workspace; a key made for calling
// models only (completions.write) cannot loosen or tighten its
// workspace's limits.
const (
	ScopeCreate = "rate_limits.create"
	ScopeRead   = "rate_limits.read"
	ScopeList   = "rate_limits.list"
	ScopeUpdate = "rate_limits.update"
	ScopeDelete = "rate_limits.delete"
)

func init() { caddy.RegisterModule(APIModule{}) }

// APIModule is the llm.api.rate_limits module: the rate-limit policy API
// and where callers stand on the policies.
type APIModule struct {
	app *app.App
}

// CaddyModule returns the Caddy module information.
func (APIModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".rate_limits", New: func() caddy.Module { return new(APIModule) }}
}

// Provision takes the llm app, whose policy store and limiter the routes
// serve.
func (m *APIModule) Provision(ctx caddy.Context) error {
	a, err := app.Get(ctx)
	m.app = a
	return err
}

// Routes implements controlplane.Module. Usage is read with
// rate_limits.read, as one policy is: a count of the caller's own
// workspace's policies, never a secret.
func (m *APIModule) Routes() []controlplane.Route {
	return []controlplane.Route{
		{Method: http.MethodPost, Path: apiCollection, Scope: ScopeCreate, Handler: m.handle(createPolicy)},
		{Method: http.MethodGet, Path: apiCollection, Scope: ScopeList, Handler: m.handle(listPolicies)},
		{Method: http.MethodGet, Path: apiItem, Scope: ScopeRead, Handler: m.handle(getPolicy)},
		{Method: http.MethodPut, Path: apiItem, Scope: ScopeUpdate, Handler: m.handle(updatePolicy)},
		{Method: http.MethodDelete, Path: apiItem, Scope: ScopeDelete, Handler: m.handle(archivePolicy)},
		{Method: http.MethodGet, Path: apiUsage, Scope: ScopeRead, Handler: m.handle(getUsage)},
		{Method: http.MethodGet, Path: apiUsageMine, Scope: ScopeRead, Handler: m.handle(listMyUsage)},
	}
}

// apiCall is one call of the policy API.
type apiCall struct {
	*controlplane.Call
	app *app.App
}

func (m *APIModule) handle(fn func(*apiCall) (any, error)) controlplane.Handler {
	return func(cp *controlplane.Call) (any, error) {
		if m.app.Policies() == nil {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the rate-limit policy store is unavailable; try again later")
		}
		return fn(&apiCall{Call: cp, app: m.app})
	}
}

// createdResponse is the spec's answer to a create.
type createdResponse struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

// listResponse is a page of policies, shaped like OpenAI's (and the batch)
// list objects.
type listResponse struct {
	Object  string             `json:"object"`
	Data    []*policies.Policy `json:"data"`
	HasMore bool               `json:"has_more"`
	FirstID *string            `json:"first_id"`
	LastID  *string            `json:"last_id"`
}

// createPolicy answers POST /v1/policies/rate-limits. The workspace and
// organisation are the gateway key's; a body may repeat them but not name
// others, since a key that could write policies into another tenant could
// throttle it.
func createPolicy(c *apiCall) (any, error) {
	r := c.Request
	p, err := policies.ParseCreate(c.Body)
	if err != nil {
		return nil, err
	}
	if err := scope(p, c); err != nil {
		return nil, err
	}
	if err := c.app.Policies().Create(r.Context(), p); err != nil {
		return nil, err
	}
	c.audit("create", p, keys.ChangedFields(&policies.Policy{}, p, auditFields...))
	return createdResponse{ID: p.ID, Object: policies.ObjectRateLimits}, nil
}

// scope fills the workspace and organisation from the key, rejecting a
// body that names other ones.
func scope(p *policies.Policy, c *apiCall) error {
	id := c.Caller
	switch p.WorkspaceID {
	case "":
		p.WorkspaceID = id.WorkspaceID
	case id.WorkspaceID:
	default:
		return &policies.FieldError{Field: "workspace_id", Message: "must be the gateway key's workspace (" + id.WorkspaceID + ")"}
	}
	switch p.OrganisationID {
	case "":
		p.OrganisationID = id.OrganisationID
	case id.OrganisationID:
	default:
		return &policies.FieldError{Field: "organisation_id", Message: "must be the gateway key's organisation (" + id.OrganisationID + ")"}
	}
	return nil
}

// getPolicy answers GET /v1/policies/rate-limits/{id}?status=active|archived.
func getPolicy(c *apiCall) (any, error) {
	r := c.Request
	status, err := statusQuery(r, policies.StatusActive)
	if err != nil {
		return nil, err
	}
	p, err := lookup(r, c)
	if err != nil {
		return nil, err
	}
	if p.Status != status {
		return nil, &notFoundError{id: p.ID, status: status}
	}
	return p, nil
}

// listPolicies answers GET /v1/policies/rate-limits with the key's
// workspace's policies, oldest first, both statuses unless ?status= says
// one; ?after=<id> continues after that policy, ?limit= sizes the page.
func listPolicies(c *apiCall) (any, error) {
	r := c.Request
	q := r.URL.Query()
	status, err := statusQuery(r, "")
	if err != nil {
		return nil, err
	}
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return nil, &policies.FieldError{Field: "limit", Message: "must be an integer from 1 to 100"}
		}
		limit = n
	}
	all, err := c.app.Policies().List(r.Context(), c.Caller.WorkspaceID)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(p *policies.Policy) bool { return !owned(p, c.Caller) })
	start := 0
	if after := q.Get("after"); after != "" {
		// Find the cursor in the unfiltered, ordered listing, so a cursor
		// whose policy changed status since still continues the walk.
		start = -1
		for i, p := range all {
			if p.ID == after {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, &policies.FieldError{Field: "after", Message: "is not the id of a policy of this workspace"}
		}
	}
	page := make([]*policies.Policy, 0, min(limit, len(all)))
	more := false
	for _, p := range all[start:] {
		if status != "" && p.Status != status {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, p)
	}
	resp := listResponse{Object: "list", Data: page, HasMore: more}
	if len(page) > 0 {
		resp.FirstID, resp.LastID = &page[0].ID, &page[len(page)-1].ID
	}
	return resp, nil
}

// updateBody is what PUT may send. Each field is kept raw so an absent
// field (keep) can be told from null (clear, for name). The record's other
// fields may be sent back as they are (a client PUTs what it GOT) but not
// changed: type would mix requests and tokens in one counter, status has
// DELETE, and the workspace and organisation are the key's.
type updateBody struct {
	Value          json.RawMessage `json:"value"`
	Name           json.RawMessage `json:"name"`
	Conditions     json.RawMessage `json:"conditions"`
	GroupBy        json.RawMessage `json:"group_by"`
	Unit           json.RawMessage `json:"unit"`
	Type           json.RawMessage `json:"type"`
	Status         json.RawMessage `json:"status"`
	WorkspaceID    json.RawMessage `json:"workspace_id"`
	OrganisationID json.RawMessage `json:"organisation_id"`

	DefaultReservation json.RawMessage `json:"default_reservation"`
}

// updatePolicy answers PUT /v1/policies/rate-limits/{id}: it changes
// value, name, conditions, group_by and unit (a changed window keeps the
// counters, conservatively re-bucketed). Fields left out keep their value.
// The new limit applies to the next request.
func updatePolicy(c *apiCall) (any, error) {
	r := c.Request
	p, err := lookup(r, c)
	if err != nil {
		return nil, err
	}
	before := p.Clone()
	if err := applyUpdate(p, c.Body); err != nil {
		return nil, err
	}
	if err := c.app.Policies().Put(r.Context(), p); err != nil {
		return nil, err
	}
	c.audit("update", p, keys.ChangedFields(before, p, auditFields...))
	p.Object = policies.ObjectRateLimits
	return p, nil
}

// applyUpdate decodes an update body onto p and validates the result.
func applyUpdate(p *policies.Policy, body []byte) error {
	var b updateBody
	if err := json.Unmarshal(body, &b); err != nil {
		return &policies.FieldError{Field: "body", Message: "must be a JSON object"}
	}
	set := func(raw json.RawMessage, field string, dst any) error {
		if len(raw) == 0 {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return &policies.FieldError{Field: field, Message: "has the wrong type"}
		}
		return nil
	}
	fixed := func(raw json.RawMessage, field, current string) error {
		var v string
		if len(raw) == 0 {
			return nil
		}
		if err := json.Unmarshal(raw, &v); err != nil || v != current {
			return &policies.FieldError{Field: field, Message: "cannot be changed on update (it is " + strconv.Quote(current) + ")"}
		}
		return nil
	}
	if len(b.Value) > 0 && !bytes.Equal(b.Value, []byte("null")) {
		if err := set(b.Value, "value", &p.Value); err != nil {
			return err
		}
	} else if len(b.Value) > 0 {
		return &policies.FieldError{Field: "value", Message: "is required and must be a number greater than 0"}
	}
	if len(b.Name) > 0 {
		p.Name = nil // null clears the name
		if err := set(b.Name, "name", &p.Name); err != nil {
			return err
		}
	}
	if len(b.Conditions) > 0 {
		p.Conditions = nil
		if err := set(b.Conditions, "conditions", &p.Conditions); err != nil {
			return err
		}
	}
	if len(b.GroupBy) > 0 {
		p.GroupBy = nil
		if err := set(b.GroupBy, "group_by", &p.GroupBy); err != nil {
			return err
		}
	}
	if err := set(b.Unit, "unit", &p.Unit); err != nil {
		return err
	}
	if err := set(b.DefaultReservation, "default_reservation", &p.DefaultReservation); err != nil {
		return err
	}
	for _, f := range []struct {
		raw           json.RawMessage
		name, current string
	}{
		{b.Type, "type", p.Type},
		{b.Status, "status", p.Status},
		{b.WorkspaceID, "workspace_id", p.WorkspaceID},
		{b.OrganisationID, "organisation_id", p.OrganisationID},
	} {
		if err := fixed(f.raw, f.name, f.current); err != nil {
			return err
		}
	}
	return p.ValidateBody()
}

// archivePolicy answers DELETE /v1/policies/rate-limits/{id}: the policy
// is archived, not erased, so its id keeps answering GET ?status=archived;
// it stops being enforced at once on this instance and within the store's
// cache TTL (5s) on the others. Archiving an archived policy is a no-op.
func archivePolicy(c *apiCall) (any, error) {
	r := c.Request
	p, err := lookup(r, c)
	if err != nil {
		return nil, err
	}
	if p.Status != policies.StatusArchived {
		p.Status = policies.StatusArchived
		if err := c.app.Policies().Put(r.Context(), p); err != nil {
			return nil, err
		}
		c.audit("delete", p, []string{"status"})
	}
	p.Object = policies.ObjectRateLimits
	return p, nil
}

// auditFields are the members of a policy the audit log names when they
// change.
var auditFields = []string{"name", "type", "unit", "value", "conditions", "group_by", "default_reservation", "status", "workspace_id"}

// audit records a change to p in the audit log as rate_limit.<verb>.
func (c *apiCall) audit(verb string, p *policies.Policy, fields []string) {
	c.Audit("rate_limit."+verb, "rate_limit", p.ID, p.WorkspaceID, p.OrganisationID, fields)
}

// lookup returns the policy named by the path, if it belongs to the
// caller's workspace. Another workspace's policy is reported as not found,
// so ids cannot be probed across workspaces.
func lookup(r *http.Request, c *apiCall) (*policies.Policy, error) {
	id := r.PathValue("id")
	if len(id) != 36 || uuid.Validate(id) != nil {
		return nil, &policies.FieldError{Field: pathParam, Message: "must be a UUID"}
	}
	p, err := c.app.Policies().Get(r.Context(), id)
	if errors.Is(err, policies.ErrNotFound) || (err == nil && !owned(p, c.Caller)) {
		return nil, &notFoundError{id: id}
	}
	return p, err
}

// owned reports whether p is a record of the caller's tenant: the same
// rule as enforcement (policies.Policy.InScope), and never a record without
// a tenant, which only the Caddyfile declares.
func owned(p *policies.Policy, c *identity.Caller) bool {
	return p.WorkspaceID != "" && p.OrganisationID != "" && p.InScope(c.WorkspaceID, c.OrganisationID)
}

// statusQuery reads ?status=, which must be active or archived.
func statusQuery(r *http.Request, def string) (string, error) {
	switch s := r.URL.Query().Get("status"); s {
	case "":
		return def, nil
	case policies.StatusActive, policies.StatusArchived:
		return s, nil
	}
	return "", &policies.FieldError{Field: "status", Message: "must be active or archived"}
}

// notFoundError is a 404: no policy with this id in the caller's
// workspace, or none in the status asked for.
type notFoundError struct{ id, status string }

func (e *notFoundError) Error() string {
	if e.status != "" {
		return "no " + e.status + " rate-limit policy " + e.id
	}
	return "rate-limit policy " + e.id + " not found"
}

// MapError implements controlplane.ErrorMapper: a *FieldError is a 400
// naming the field, a missing policy a 404; anything else (the store
// unreachable) is the router's 503, logged without showing its text.
func (*APIModule) MapError(err error) *apierror.Error {
	var fe *policies.FieldError
	var nf *notFoundError
	switch {
	case errors.As(err, &fe):
		return apierror.BadRequest(fe.Field, "%s %s", fe.Field, fe.Message)
	case errors.As(err, &nf):
		return apierror.New(http.StatusNotFound, apierror.TypeNotFound, nf.Error()).WithCode("policy_not_found")
	case errors.Is(err, policies.ErrExists):
		return apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "rate-limit policy already exists")
	}
	return nil
}
