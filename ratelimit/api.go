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
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// API paths. The collection is the spec's; the id routes beyond GET and
// the listing are this gateway's additions.
const (
	apiOwned      = "/v1/policies/"
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

func init() {
	controlplane.Handle("POST "+apiCollection, apiOwned, controlplane.RequireScope(ScopeCreate, createPolicy))
	controlplane.Handle("GET "+apiCollection, apiOwned, controlplane.RequireScope(ScopeList, listPolicies))
	controlplane.Handle("GET "+apiItem, apiOwned, controlplane.RequireScope(ScopeRead, getPolicy))
	controlplane.Handle("PUT "+apiItem, apiOwned, controlplane.RequireScope(ScopeUpdate, updatePolicy))
	controlplane.Handle("DELETE "+apiItem, apiOwned, controlplane.RequireScope(ScopeDelete, archivePolicy))
	// Usage is read with rate_limits.read, as one policy is: a count of
	// the caller's own workspace's policies, never a secret.
	controlplane.Handle("GET "+apiUsage, apiOwned, controlplane.RequireScope(ScopeRead, getUsage))
	controlplane.Handle("GET "+apiUsageMine, apiOwned, controlplane.RequireScope(ScopeRead, listMyUsage))
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
func createPolicy(w http.ResponseWriter, r *http.Request) {
	c := caller(w, r)
	if c == nil {
		return
	}
	p, err := policies.ParseCreate(c.Body)
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := scope(p, c); err != nil {
		writeErr(w, err)
		return
	}
	if err := c.App.Policies().Create(r.Context(), p); err != nil {
		writeErr(w, err)
		return
	}
	audit(r, c, "create", p, keys.ChangedFields(&policies.Policy{}, p, auditFields...))
	writeJSON(w, createdResponse{ID: p.ID, Object: policies.ObjectRateLimits})
}

// scope fills the workspace and organisation from the key, rejecting a
// body that names other ones.
func scope(p *policies.Policy, c *controlplane.Caller) error {
	id := c.Identity
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
func getPolicy(w http.ResponseWriter, r *http.Request) {
	c := caller(w, r)
	if c == nil {
		return
	}
	status, err := statusQuery(r, policies.StatusActive)
	if err != nil {
		writeErr(w, err)
		return
	}
	p, err := lookup(r, c)
	if err != nil {
		writeErr(w, err)
		return
	}
	if p.Status != status {
		writeErr(w, &notFoundError{id: p.ID, status: status})
		return
	}
	writeJSON(w, p)
}

// listPolicies answers GET /v1/policies/rate-limits with the key's
// workspace's policies, oldest first, both statuses unless ?status= says
// one; ?after=<id> continues after that policy, ?limit= sizes the page.
func listPolicies(w http.ResponseWriter, r *http.Request) {
	c := caller(w, r)
	if c == nil {
		return
	}
	q := r.URL.Query()
	status, err := statusQuery(r, "")
	if err != nil {
		writeErr(w, err)
		return
	}
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeErr(w, &policies.FieldError{Field: "limit", Message: "must be an integer from 1 to 100"})
			return
		}
		limit = n
	}
	all, err := c.App.Policies().List(r.Context(), c.Identity.WorkspaceID)
	if err != nil {
		writeErr(w, err)
		return
	}
	all = slices.DeleteFunc(all, func(p *policies.Policy) bool { return !owned(p, c) })
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
			writeErr(w, &policies.FieldError{Field: "after", Message: "is not the id of a policy of this workspace"})
			return
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
	writeJSON(w, resp)
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
func updatePolicy(w http.ResponseWriter, r *http.Request) {
	c := caller(w, r)
	if c == nil {
		return
	}
	p, err := lookup(r, c)
	if err != nil {
		writeErr(w, err)
		return
	}
	before := p.Clone()
	if err := applyUpdate(p, c.Body); err != nil {
		writeErr(w, err)
		return
	}
	if err := c.App.Policies().Put(r.Context(), p); err != nil {
		writeErr(w, err)
		return
	}
	audit(r, c, "update", p, keys.ChangedFields(before, p, auditFields...))
	p.Object = policies.ObjectRateLimits
	writeJSON(w, p)
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
func archivePolicy(w http.ResponseWriter, r *http.Request) {
	c := caller(w, r)
	if c == nil {
		return
	}
	p, err := lookup(r, c)
	if err != nil {
		writeErr(w, err)
		return
	}
	if p.Status != policies.StatusArchived {
		p.Status = policies.StatusArchived
		if err := c.App.Policies().Put(r.Context(), p); err != nil {
			writeErr(w, err)
			return
		}
		audit(r, c, "delete", p, []string{"status"})
	}
	p.Object = policies.ObjectRateLimits
	writeJSON(w, p)
}

// auditFields are the members of a policy the audit log names when they
// change.
var auditFields = []string{"name", "type", "unit", "value", "conditions", "group_by", "default_reservation", "status", "workspace_id"}

// audit records a change to p in the audit log (app.Audit) as
// rate_limit.<verb>.
func audit(r *http.Request, c *controlplane.Caller, verb string, p *policies.Policy, fields []string) {
	c.App.Audit(r.Context(), c.Identity, "rate_limit."+verb, "rate_limit", p.ID, p.WorkspaceID, p.OrganisationID, fields)
}

// caller returns the authenticated caller, or answers 500 when the route
// was reached without one (a wiring bug, not a client error).
func caller(w http.ResponseWriter, r *http.Request) *controlplane.Caller {
	c := controlplane.From(r)
	if c == nil || c.Identity == nil || c.App == nil || c.App.Policies() == nil {
		apierror.Write(w, apierror.New(http.StatusInternalServerError, apierror.TypeServer, "rate-limit policies are not available"))
		return nil
	}
	return c
}

// lookup returns the policy named by the path, if it belongs to the
// caller's workspace. Another workspace's policy is reported as not found,
// so ids cannot be probed across workspaces.
func lookup(r *http.Request, c *controlplane.Caller) (*policies.Policy, error) {
	id := r.PathValue("id")
	if len(id) != 36 || uuid.Validate(id) != nil {
		return nil, &policies.FieldError{Field: pathParam, Message: "must be a UUID"}
	}
	p, err := c.App.Policies().Get(r.Context(), id)
	if errors.Is(err, policies.ErrNotFound) || (err == nil && !owned(p, c)) {
		return nil, &notFoundError{id: id}
	}
	return p, err
}

// owned reports whether p is a record of the caller's tenant: the same
// rule as enforcement (policies.Policy.InScope), and never a record without
// a tenant, which only the Caddyfile declares.
func owned(p *policies.Policy, c *controlplane.Caller) bool {
	return p.WorkspaceID != "" && p.OrganisationID != "" && p.InScope(c.Identity.WorkspaceID, c.Identity.OrganisationID)
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

// writeErr answers err in the OpenAI envelope: a *FieldError as a 400
// naming the field, a missing policy as a 404, anything else (the store
// unreachable) as a 503 without the internal error text.
func writeErr(w http.ResponseWriter, err error) {
	var fe *policies.FieldError
	var nf *notFoundError
	switch {
	case errors.As(err, &fe):
		apierror.Write(w, apierror.BadRequest(fe.Field, "%s %s", fe.Field, fe.Message))
	case errors.As(err, &nf):
		apierror.Write(w, apierror.New(http.StatusNotFound, apierror.TypeNotFound, nf.Error()).WithCode("policy_not_found"))
	case errors.Is(err, policies.ErrExists):
		apierror.Write(w, apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "rate-limit policy already exists"))
	default:
		// Store errors name the store (a Redis address, a storage key),
		// never a credential; they are logged, not shown to the client.
		caddy.Log().Named("http.handlers.llm_ratelimit").Error("rate-limit policy store failed", zap.Error(err))
		apierror.Write(w, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the rate-limit policy store is unavailable; try again later"))
	}
}

// writeJSON answers 200 with v.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeErr(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
