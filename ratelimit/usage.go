package ratelimit

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// ObjectUsage is the "object" of a usage answer.
const ObjectUsage = "rate-limit-usage"

// Bounds on the group a caller may name: each value as long as a gateway
// key name or a metadata value is allowed to be, and a query no longer
// than a policy's group_by (at most a handful of keys) can need.
const (
	maxGroupValue = 256
	maxUsageQuery = 8 << 10
)

// usageResponse is where one group stands on one policy. Counts are in
// the policy's unit: requests, tokens, or US dollars for a cost policy.
type usageResponse struct {
	Object   string            `json:"object"`
	PolicyID string            `json:"policy_id"`
	Type     string            `json:"type"`
	Unit     string            `json:"unit"`
	Group    map[string]string `json:"group"`
	// Value is the limit as enforced (a fractional request or token limit
	// counts whole units).
	Value float64 `json:"value"`
	// Used never exceeds Value: a settlement that overshot the limit shows
	// as nothing remaining, and as a later window_ends.
	Used      float64 `json:"used"`
	Remaining float64 `json:"remaining"`
	// ResetAfter is the seconds until the group's count is back to zero
	// (the window has freed every unit); WindowEnds is that instant, null
	// when nothing is counted.
	ResetAfter float64    `json:"reset_after"`
	WindowEnds *time.Time `json:"window_ends"`
	// RetryAfter, when nothing remains, is the seconds until one more unit
	// would be admitted; 0 otherwise.
	RetryAfter float64 `json:"retry_after"`
}

// usageList is the answer of the caller's own usage on every policy;
// HasMore says policies beyond maxListLimit were left out.
type usageList struct {
	Object  string           `json:"object"`
	Data    []*usageResponse `json:"data"`
	HasMore bool             `json:"has_more"`
}

// getUsage answers GET /v1/policies/rate-limits/{id}/usage?<group_by
// key>=<value>...: the group's count on the policy, read without spending.
// The policy must be the caller's tenant's (lookup), and its id is the
// first part of every counter key, so no query names another
// workspace's counter.
func getUsage(c *apiCall) (any, error) {
	r := c.Request
	p, err := lookup(r, c)
	if err != nil {
		return nil, err
	}
	if p.Status != policies.StatusActive {
		return nil, &notFoundError{id: p.ID, status: policies.StatusActive}
	}
	if len(r.URL.RawQuery) > maxUsageQuery {
		return nil, &policies.FieldError{Field: "query", Message: "is too long"}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &policies.FieldError{Field: "query", Message: "is not a valid query string"}
	}
	a, group, err := groupOf(p, q, c.Caller)
	if err != nil {
		return nil, err
	}
	u, err := usageOf(r.Context(), c.app.Limiter(), p, a, group)
	if err != nil {
		return nil, limiterDown(err)
	}
	return u, nil
}

// listMyUsage answers GET /v1/policies/rate-limits/usage: the caller's own
// group on each active policy of its workspace that groups only by what
// the caller's identity says (api_key, workspace_id, organisation_id).
// Policies grouped by request attributes (model, metadata...) have no
// group of "the caller" and are left out: ask for one group with the
// {id}/usage route. One limiter read per policy listed, so at most the
// listing's largest page of them (the oldest; has_more says there are
// more), which bounds the Redis round trips of one call.
func listMyUsage(c *apiCall) (any, error) {
	r := c.Request
	if r.URL.RawQuery != "" {
		return nil, &policies.FieldError{Field: "query", Message: "is not accepted: this route reports the calling key's own groups"}
	}
	all, err := c.app.Policies().List(r.Context(), c.Caller.WorkspaceID)
	if err != nil {
		return nil, err
	}
	out := usageList{Object: "list", Data: []*usageResponse{}}
	for _, p := range all {
		if !owned(p, c.Caller) || p.Status != policies.StatusActive || !IdentityGrouped(p.GroupBy) {
			continue
		}
		if len(out.Data) == maxListLimit {
			out.HasMore = true
			break
		}
		a, group, err := groupOf(p, nil, c.Caller)
		if err != nil {
			return nil, err
		}
		u, err := usageOf(r.Context(), c.app.Limiter(), p, a, group)
		if err != nil {
			return nil, limiterDown(err)
		}
		out.Data = append(out.Data, u)
	}
	return out, nil
}

// IdentityGrouped reports whether every group_by key is one the caller's
// identity fills (api_key, workspace_id, organisation_id), so the caller
// has exactly one group on the policy.
func IdentityGrouped(groupBy []policies.GroupBy) bool {
	for _, g := range groupBy {
		switch g.Key {
		case policies.KeyAPIKey, policies.KeyWorkspaceID, policies.KeyOrganisationID:
		default:
			return false
		}
	}
	return true
}

// groupOf builds the attributes of the group q names on p: only p's
// group_by keys are accepted, each once and at most maxGroupValue bytes.
// A key not given is the caller's own value for api_key, workspace_id
// and organisation_id, and absent (the empty value, as GroupKey counts
// it) for the others. workspace_id and organisation_id may only repeat
// the caller's: a policy of this workspace never counts another's.
func groupOf(p *policies.Policy, q url.Values, id *identity.Caller) (*policies.Attributes, map[string]string, error) {
	grouped := make(map[string]bool, len(p.GroupBy))
	for _, g := range p.GroupBy {
		grouped[g.Key] = true
	}
	for k, vs := range q {
		switch {
		case !grouped[k]:
			return nil, nil, &policies.FieldError{Field: k, Message: "is not a group_by key of this policy"}
		case len(vs) != 1:
			return nil, nil, &policies.FieldError{Field: k, Message: "must be given once"}
		case len(vs[0]) > maxGroupValue:
			return nil, nil, &policies.FieldError{Field: k, Message: "must be at most 256 bytes"}
		}
	}
	a := &policies.Attributes{WorkspaceID: id.WorkspaceID, OrganisationID: id.OrganisationID, APIKey: id.Name}
	group := make(map[string]string, len(p.GroupBy))
	for _, g := range p.GroupBy {
		v, given := q[g.Key]
		if given {
			if err := set(a, g.Key, v[0], id); err != nil {
				return nil, nil, err
			}
		}
		group[g.Key], _ = a.Get(g.Key)
	}
	return a, group, nil
}

// set puts one attribute's value into a.
func set(a *policies.Attributes, key, v string, id *identity.Caller) error {
	switch key {
	case policies.KeyWorkspaceID:
		if v != id.WorkspaceID {
			return &policies.FieldError{Field: key, Message: "must be the gateway key's workspace (" + id.WorkspaceID + ")"}
		}
	case policies.KeyOrganisationID:
		if v != id.OrganisationID {
			return &policies.FieldError{Field: key, Message: "must be the gateway key's organisation (" + id.OrganisationID + ")"}
		}
	default:
		a.Set(key, v)
	}
	return nil
}

// usageOf reads the group's count with a cost-0 admission, which spends
// nothing (and admits nothing): the limiter's Remaining is the limit less
// the units in the window.
func usageOf(ctx context.Context, lim policies.Limiter, p *policies.Policy, a *policies.Attributes, group map[string]string) (*usageResponse, error) {
	limit := p.Limit()
	d, err := lim.Admit(ctx, p.GroupKey(a), limit, p.Window(), 0)
	if err != nil {
		return nil, err
	}
	scale := 1.0
	if p.Type == policies.TypeCost {
		scale = 1 / float64(policies.MicroUSD)
	}
	u := &usageResponse{
		Object: ObjectUsage, PolicyID: p.ID, Type: p.Type, Unit: p.Unit, Group: group,
		Value:      float64(limit) * scale,
		Used:       float64(limit-d.Remaining) * scale,
		Remaining:  float64(d.Remaining) * scale,
		ResetAfter: seconds(d.ResetAfter),
	}
	if d.Remaining == 0 {
		u.RetryAfter = seconds(d.RetryAfter)
	}
	if d.ResetAfter > 0 {
		t := time.Now().Add(d.ResetAfter).UTC().Truncate(time.Millisecond)
		u.WindowEnds = &t
	}
	return u, nil
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

// limiterDown is the answer to a limiter that could not be read: 503, the
// error logged (it names Redis's address, never a credential), not shown.
func limiterDown(err error) *apierror.Error {
	caddy.Log().Named("http.handlers.llm_ratelimit").Error("rate limiter read failed", zap.Error(err))
	return apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the rate limiter is unavailable; try again later")
}
