// Package budgets holds usage limits ("budgets") in the reference's
// shape: a credit limit in dollars (or tokens) for the requests matching
// some conditions, counted per group, over a calendar period that resets
// weekly or monthly in the limit's time zone, or never. Requests reserve
// at admission and settle on completion through the same counters and
// arithmetic as the rate limiter's token and cost policies
// (policies.Limiter, policies.SettleDelta); matching and counter keys are
// package policies' (Policy.Match, Policy.GroupKey), not a copy.
package budgets

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Values of UsageLimit.PeriodicReset.
const (
	ResetNone    = "none"
	ResetWeekly  = "weekly"
	ResetMonthly = "monthly"
)

// ObjectUsageLimits is the "object" of a usage limit on retrieval.
const ObjectUsageLimits = "policy_usage_limits"

// MaxCredit bounds CreditLimit (dollars or tokens), so that counters stay
// within int64: a cost limit counts nano-dollars (1e18 at most). The
// limiter's Redis scripts add in float64, exact to the unit up to 2^53:
// a cost counter is exact to the nano-dollar up to US$9,007,199 in a
// period, and beyond that to within one part in 10^16.
const MaxCredit = 1e9

// UsageLimit is a budget as the reference's /policies/usage-limits API
// shows it.
type UsageLimit struct {
	ID             string               `json:"id"`
	Name           *string              `json:"name"`
	Type           string               `json:"type"`
	CreditLimit    float64              `json:"credit_limit"`
	AlertThreshold *float64             `json:"alert_threshold"`
	PeriodicReset  string               `json:"periodic_reset"`
	Timezone       string               `json:"timezone,omitempty"`
	Conditions     []policies.Condition `json:"conditions"`
	GroupBy        []policies.GroupBy   `json:"group_by"`
	Status         string               `json:"status"`
	WorkspaceID    string               `json:"workspace_id"`
	OrganisationID string               `json:"organisation_id"`
	CreatedAt      time.Time            `json:"created_at"`
	LastUpdatedAt  time.Time            `json:"last_updated_at"`
	Object         string               `json:"object,omitempty"`

	// match is the policy whose matcher and group keys the limit uses.
	match *policies.Policy
	loc   *time.Location
}

// NanoPerUSD is the number of units a cost usage limit counts per US
// dollar: nano-dollars, the ledger's unit (ledger.NanoUSD), so a
// budget's counter holds what the ledger's records of its requests add
// up to, exactly. (Cost rate-limit policies count micro-dollars,
// policies.MicroUSD.)
const NanoPerUSD = ledger.NanoUSD

// Limit is the credit limit in counter units: nano-dollars for cost
// (converted as the ledger converts a cost, to the nearest: a limit of
// 0.00002 dollars is 20,000 nano-dollars), tokens for tokens. A limit
// below one unit counts one.
func (u *UsageLimit) Limit() int64 {
	return max(u.units(u.CreditLimit), 1)
}

// units converts v, in the limit's unit (dollars or tokens), to counter
// units.
func (u *UsageLimit) units(v float64) int64 {
	if u.Type == policies.TypeCost {
		return ledger.NanoFromUSD(v)
	}
	if math.IsNaN(v) || v < 1 {
		return 0
	}
	return int64(v)
}

// AlertAt is the counter value from which a settlement hands the
// period's spend to the alerter, which decides what is due (Alerter.Fire):
// the alert threshold, or the limit itself for a limit without one (its
// exhausted event).
func (u *UsageLimit) AlertAt() int64 {
	if at := u.thresholdAt(); at > 0 {
		return at
	}
	return u.Limit()
}

// thresholdAt is the counter value at which the threshold event fires, or
// 0 for none. alert_threshold is in the limit's unit (dollars or tokens),
// as the reference's.
func (u *UsageLimit) thresholdAt() int64 {
	if u.AlertThreshold == nil || *u.AlertThreshold <= 0 {
		return 0
	}
	return max(u.units(*u.AlertThreshold), 1)
}

// Policy returns the policy that matches requests for u (its conditions,
// group_by and scope), built by Prepare.
func (u *UsageLimit) Policy() *policies.Policy { return u.match }

// Location is the time zone periods are counted in (UTC by default).
func (u *UsageLimit) Location() *time.Location {
	if u.loc == nil {
		return time.UTC
	}
	return u.loc
}

// Prepare validates u as a client sets it and builds what enforcing it
// needs. It returns a *policies.FieldError naming the field at fault.
func (u *UsageLimit) Prepare() error {
	switch u.Type {
	case policies.TypeCost, policies.TypeTokens:
	case "":
		return &policies.FieldError{Field: "type", Message: "is required; one of cost, tokens"}
	default:
		return &policies.FieldError{Field: "type", Message: "must be one of cost, tokens"}
	}
	if math.IsNaN(u.CreditLimit) || math.IsInf(u.CreditLimit, 0) || u.CreditLimit <= 0 || u.CreditLimit > MaxCredit {
		return &policies.FieldError{Field: "credit_limit", Message: "is required and must be a number above 0 and at most 1e9"}
	}
	if t := u.AlertThreshold; t != nil && (math.IsNaN(*t) || *t <= 0 || *t > u.CreditLimit) {
		return &policies.FieldError{Field: "alert_threshold", Message: "must be above 0 and at most credit_limit"}
	}
	switch u.PeriodicReset {
	case "":
		u.PeriodicReset = ResetNone
	case ResetNone, ResetWeekly, ResetMonthly:
	default:
		return &policies.FieldError{Field: "periodic_reset", Message: "must be one of none, weekly, monthly"}
	}
	loc := time.UTC
	if u.Timezone != "" {
		l, err := time.LoadLocation(u.Timezone)
		if err != nil || len(u.Timezone) > 64 {
			return &policies.FieldError{Field: "timezone", Message: "must be an IANA time zone such as Europe/Amsterdam"}
		}
		loc = l
	}
	if u.Name != nil && utf8.RuneCountInString(*u.Name) > policies.MaxNameLength {
		return &policies.FieldError{Field: "name", Message: "must be at most 255 characters"}
	}
	// The conditions and group_by follow the rate-limit policies' rules:
	// validate them as such a policy.
	p := &policies.Policy{ID: u.ID, Type: u.Type, Unit: policies.UnitRPD, Value: 1, Status: policies.StatusActive,
		WorkspaceID: u.WorkspaceID, OrganisationID: u.OrganisationID, Conditions: u.Conditions, GroupBy: u.GroupBy}
	if err := p.ValidateBody(); err != nil {
		return err
	}
	if u.ID == "" {
		// Time-ordered, so limits created in one millisecond list in
		// creation order (the store breaks CreatedAt ties by id).
		u.ID = uuid.Must(uuid.NewV7()).String()
		p.ID = u.ID
	}
	if u.Status == "" {
		u.Status = policies.StatusActive
	}
	u.match, u.loc = p, loc
	return nil
}

// Clone returns a deep copy without the prepared state's aliasing of
// slices, so a caller cannot change a store's record.
func (u *UsageLimit) Clone() *UsageLimit {
	c := *u
	c.Conditions = append([]policies.Condition(nil), u.Conditions...)
	c.GroupBy = append([]policies.GroupBy(nil), u.GroupBy...)
	if u.Name != nil {
		n := *u.Name
		c.Name = &n
	}
	if u.AlertThreshold != nil {
		a := *u.AlertThreshold
		c.AlertThreshold = &a
	}
	if u.match != nil {
		c.match = u.match.Clone()
		c.match.Conditions, c.match.GroupBy = c.Conditions, c.GroupBy
	}
	return &c
}

// Parse decodes a usage limit from a request body, refusing unknown
// fields' types (not unknown fields: the reference's SDK may send more).
func Parse(body []byte) (*UsageLimit, error) {
	var u UsageLimit
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, &policies.FieldError{Field: "body", Message: fmt.Sprintf("is not a valid usage limit: %v", jsonMessage(err))}
	}
	return &u, nil
}

// jsonMessage shortens a decoding error to what the client sent wrong.
func jsonMessage(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("%s has the wrong type", te.Field)
	}
	return "invalid JSON"
}
