package budgets

import (
	"context"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// The spend report: where every group of every usage limit stands, for an
// administrator (GET /v1/policies/usage-limits/usage, the console's
// budgets page). A limit counts apart each group of its group_by; the
// report finds the groups a limit can have from the gateway keys in the
// caller's reach (the members), since a key's name, workspace and
// organisation are what an identity group_by reads, and reads each
// group's counter once, through StatusOf, as the usage view and the
// response headers do.

// DefaultReportGroups bounds the counters one report reads (each a
// limiter round trip: one Redis call for a cluster).
const DefaultReportGroups = 1000

// Member is a gateway key the report may find in a group: the attributes
// of its requests known before anything else about them.
type Member struct {
	APIKey, WorkspaceID, OrganisationID string
}

// GroupStatus is where one group of a limit stands.
type GroupStatus struct {
	Limit *UsageLimit
	// Group is the group's value of each of the limit's group_by keys.
	Group map[string]string
	Status
}

// Report is a spend report (see Enforcer.Report).
type Report struct {
	Groups []GroupStatus
	// PerRequest are the limits grouped by a request attribute that no
	// condition fixes (model, provider, metadata.team...): their groups
	// are whatever requests send, not known from the keys, so none is
	// listed.
	PerRequest []*UsageLimit
	// Truncated says groups were left unread at the bound.
	Truncated bool
}

// Limits returns the usage limits e enforces now: the stored ones and
// those set on keys (its Source's active set).
func (e *Enforcer) Limits(ctx context.Context) ([]*UsageLimit, error) {
	if e == nil {
		return nil, nil
	}
	return e.source.Active(ctx)
}

// Report returns where each group of limits stands, reading at most
// maxGroups counters (DefaultReportGroups when not above 0). A limit's
// groups are found so:
//
//   - a group_by key that a condition fixes ({"key":"virtual_key",
//     "value":"vk1"}) has that value;
//   - an identity key (api_key, workspace_id, organisation_id) takes each
//     member's value, for the members within the limit's scope that meet
//     its conditions on identity (Policy.Match with every request
//     attribute pending: a condition on the model decides what a key's
//     requests count, not whether the key has a group);
//   - any other key makes the limit PerRequest.
//
// Members that fall in one group (a limit grouped by workspace_id) read
// it once. Groups come in the order of limits, then of members.
func (e *Enforcer) Report(ctx context.Context, limits []*UsageLimit, members []Member, maxGroups int) (*Report, error) {
	if maxGroups <= 0 {
		maxGroups = DefaultReportGroups
	}
	out := &Report{Groups: []GroupStatus{}}
	for _, u := range limits {
		p := u.Policy()
		if p == nil {
			continue
		}
		fixed, byMember, ok := groupsOf(p)
		if !ok {
			out.PerRequest = append(out.PerRequest, u)
			continue
		}
		seen := map[string]bool{}
		read := func(a *policies.Attributes) (bool, error) {
			k := p.GroupKey(a)
			if seen[k] {
				return true, nil
			}
			if len(out.Groups) == maxGroups {
				out.Truncated = true
				return false, nil
			}
			seen[k] = true
			s, err := e.StatusOf(ctx, u, a)
			if err != nil {
				return false, err
			}
			g := make(map[string]string, len(p.GroupBy))
			for _, gb := range p.GroupBy {
				g[gb.Key], _ = a.Get(gb.Key)
			}
			out.Groups = append(out.Groups, GroupStatus{Limit: u, Group: g, Status: s})
			return true, nil
		}
		if !byMember {
			// One group whatever the key: the limit's own.
			a := fixed.with(Member{WorkspaceID: u.WorkspaceID, OrganisationID: u.OrganisationID})
			if more, err := read(a); err != nil || !more {
				return out, err
			}
			continue
		}
		for _, m := range members {
			a := fixed.with(m)
			if ok, need := p.Match(a); !ok && need == 0 {
				continue
			}
			if more, err := read(a); err != nil {
				return out, err
			} else if !more {
				return out, nil
			}
		}
	}
	return out, nil
}

// pendingRequest marks every attribute a request, not its key, says.
const pendingRequest = policies.PendingRouting | policies.PendingMetadata | policies.PendingModel

// fixedValues are the group_by values p's conditions fix.
type fixedValues map[string]string

// with returns the attributes of m's group, with the fixed values and
// every request attribute marked pending (so Match tests only the
// conditions on identity).
func (f fixedValues) with(m Member) *policies.Attributes {
	a := &policies.Attributes{APIKey: m.APIKey, WorkspaceID: m.WorkspaceID, OrganisationID: m.OrganisationID, Pending: pendingRequest}
	for k, v := range f {
		a.Set(k, v) // never an identity key (groupsOf)
	}
	return a
}

// groupsOf says how p's groups are found: the group_by values its
// conditions fix, whether an identity key takes each member's value, and
// false when a group_by key is a request attribute no condition fixes.
func groupsOf(p *policies.Policy) (fixed fixedValues, byMember, ok bool) {
	fixed = fixedValues{}
	for _, g := range p.GroupBy {
		v := ""
		for _, c := range p.Conditions {
			if c.Key == g.Key && c.Value != "*" {
				v = c.Value
			}
		}
		switch {
		case g.Key == policies.KeyAPIKey, g.Key == policies.KeyWorkspaceID, g.Key == policies.KeyOrganisationID:
			// A member's own value; a condition fixing it leaves only
			// the members that have it (Match).
			byMember = true
		case v != "":
			fixed[g.Key] = v
		default:
			return nil, false, false
		}
	}
	return fixed, byMember, true
}
