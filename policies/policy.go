package policies

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Values of Policy.Type: what one unit of the limit is.
const (
	TypeRequests = "requests"
	TypeTokens   = "tokens"
	// TypeCost limits spend: Value is in US dollars, counted in whole
	// micro-dollars (MicroUSD per dollar) so that counters stay integers.
	TypeCost = "cost"
)

// MicroUSD is the number of units a cost policy counts per US dollar.
const MicroUSD = 1_000_000

// Values of Policy.Unit: the length of the window the limit applies to.
const (
	UnitRPM = "rpm"
	UnitRPH = "rph"
	UnitRPD = "rpd"
)

// Values of Policy.Status. Only active policies are enforced; archived ones
// are kept so that their id keeps answering GET with status=archived.
const (
	StatusActive   = "active"
	StatusArchived = "archived"
)

// ObjectRateLimits is the spec's "object" value of a policy on retrieval.
const ObjectRateLimits = "policy_rate_limits"

// MaxNameLength is the spec's bound on a policy name, in characters.
const MaxNameLength = 255

// MaxValue bounds Policy.Value so that limits, costs and sums stay exact in
// int64 arithmetic and in the float64 numbers of Redis Lua scripts (2^53).
const MaxValue = 1e15

// Condition is one equality test a request must pass for a policy to apply.
// Value "*" accepts any present, non-empty value of Key.
type Condition struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// GroupBy names an attribute whose distinct values get separate counters.
type GroupBy struct {
	Key string `json:"key"`
}

// Policy is a rate-limit policy record as the spec defines it: requests,
// tokens or US dollars (cost) per minute, hour or day, for the requests matching Conditions,
// counted separately for each distinct tuple of the GroupBy attributes.
type Policy struct {
	ID             string      `json:"id"`
	Type           string      `json:"type"`
	Unit           string      `json:"unit"`
	Value          float64     `json:"value"`
	Status         string      `json:"status"`
	WorkspaceID    string      `json:"workspace_id"`
	OrganisationID string      `json:"organisation_id"`
	CreatedAt      time.Time   `json:"created_at"`
	LastUpdatedAt  time.Time   `json:"last_updated_at"`
	Name           *string     `json:"name"`
	Conditions     []Condition `json:"conditions"`
	GroupBy        []GroupBy   `json:"group_by"`
	// DefaultReservation is the number of output tokens a tokens or cost
	// policy reserves for a generation request that sets no output bound
	// (max_tokens, max_completion_tokens, max_output_tokens); 0 leaves it
	// to the llm_ratelimit handler's default_output_tokens. Settlement
	// then charges what the answer really used.
	DefaultReservation int64 `json:"default_reservation,omitempty"`
	// Object is "policy_rate_limits" on records returned by a Store and
	// empty on stored records, as the spec sets it on retrieval only.
	Object string `json:"object,omitempty"`
}

// Window is the length of the policy's window, or 0 for an unknown unit.
func (p *Policy) Window() time.Duration {
	switch p.Unit {
	case UnitRPM:
		return time.Minute
	case UnitRPH:
		return time.Hour
	case UnitRPD:
		return 24 * time.Hour
	}
	return 0
}

// Limit is Value as the whole number of units a Limiter counts. Fractions
// are dropped, because a counter cannot admit part of a request; a value
// below one still admits one unit per window, because a policy that admits
// nothing should be written as such, not reached by rounding.
func (p *Policy) Limit() int64 {
	v := p.Value
	if p.Type == TypeCost {
		v *= MicroUSD
	}
	if math.IsNaN(v) || v < 1 {
		return 1
	}
	if v > MaxValue {
		return int64(MaxValue)
	}
	return int64(v)
}

// CountsUsage reports whether the policy counts what a request used
// (tokens, cost): such policies reserve an estimate at admission and are
// settled on the usage the provider reported.
func (p *Policy) CountsUsage() bool { return p.Type == TypeTokens || p.Type == TypeCost }

// Clone returns a deep copy, so that a store's records cannot be changed
// through a pointer the caller keeps.
func (p *Policy) Clone() *Policy {
	c := *p
	if p.Name != nil {
		n := *p.Name
		c.Name = &n
	}
	c.Conditions = append([]Condition(nil), p.Conditions...)
	c.GroupBy = append([]GroupBy(nil), p.GroupBy...)
	return &c
}

// FieldError is a validation failure of one field of a policy or of a
// request body. Field is the JSON path of the field ("value",
// "conditions[1].key"), so the HTTP layer can answer 400 naming it.
type FieldError struct {
	Field   string
	Message string
}

// Error implements error as "field: message".
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErr(field, msg string) *FieldError { return &FieldError{Field: field, Message: msg} }

func indexed(list string, i int, field string) string {
	return list + "[" + strconv.Itoa(i) + "]." + field
}

// ValidateBody checks the fields a client sets when creating or updating a
// policy: type, unit, value, name, conditions, group_by, and the format of
// organisation_id when given. It returns the first problem as *FieldError.
// workspace_id and organisation_id are not required here because the HTTP
// layer fills them from the gateway key when the client omits them.
func (p *Policy) ValidateBody() error {
	switch p.Type {
	case TypeRequests, TypeTokens, TypeCost:
	case "":
		return fieldErr("type", "is required; one of requests, tokens, cost")
	default:
		return fieldErr("type", "must be one of requests, tokens, cost")
	}
	switch p.Unit {
	case UnitRPM, UnitRPH, UnitRPD:
	case "":
		return fieldErr("unit", "is required; one of rpm, rph, rpd")
	default:
		return fieldErr("unit", "must be one of rpm, rph, rpd")
	}
	if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) || p.Value <= 0 {
		return fieldErr("value", "is required and must be a number greater than 0")
	}
	if p.Value > MaxValue {
		return fieldErr("value", "must be at most 1e15")
	}
	if p.Name != nil && utf8.RuneCountInString(*p.Name) > MaxNameLength {
		return fieldErr("name", "must be at most 255 characters")
	}
	if p.DefaultReservation < 0 || p.DefaultReservation > MaxValue {
		return fieldErr("default_reservation", "must be a number of output tokens from 0 to 1e15")
	}
	if p.DefaultReservation != 0 && !p.CountsUsage() {
		return fieldErr("default_reservation", "applies to tokens and cost policies only")
	}
	if p.OrganisationID != "" && !validUUID(p.OrganisationID) {
		return fieldErr("organisation_id", "must be a UUID")
	}
	if len(p.Conditions) == 0 {
		return fieldErr("conditions", "is required and must have at least 1 item")
	}
	for i, c := range p.Conditions {
		if msg := checkKey(c.Key); msg != "" {
			return fieldErr(indexed("conditions", i, "key"), msg)
		}
		if c.Value == "" {
			return fieldErr(indexed("conditions", i, "value"), "must be a non-empty string")
		}
	}
	if len(p.GroupBy) == 0 {
		return fieldErr("group_by", "is required and must have at least 1 item")
	}
	for i, g := range p.GroupBy {
		if msg := checkKey(g.Key); msg != "" {
			return fieldErr(indexed("group_by", i, "key"), msg)
		}
		for _, prev := range p.GroupBy[:i] {
			if prev.Key == g.Key {
				return fieldErr(indexed("group_by", i, "key"), "duplicates an earlier group_by key")
			}
		}
	}
	return nil
}

// Validate checks a complete record before a Store writes it: the body
// fields as ValidateBody, plus id (UUID), status, workspace_id and
// organisation_id, which every stored record must carry.
func (p *Policy) Validate() error {
	if !validUUID(p.ID) {
		return fieldErr("id", "must be a UUID")
	}
	if p.Status != StatusActive && p.Status != StatusArchived {
		return fieldErr("status", "must be one of active, archived")
	}
	if p.WorkspaceID == "" {
		return fieldErr("workspace_id", "is required")
	}
	if p.OrganisationID == "" {
		return fieldErr("organisation_id", "is required")
	}
	return p.ValidateBody()
}

// createBody holds only the fields a client may set on create, so that a
// body cannot choose the id, status or timestamps of the record.
type createBody struct {
	Conditions     []Condition `json:"conditions"`
	GroupBy        []GroupBy   `json:"group_by"`
	Type           string      `json:"type"`
	Unit           string      `json:"unit"`
	Value          float64     `json:"value"`
	Name           *string     `json:"name"`
	WorkspaceID    string      `json:"workspace_id"`
	OrganisationID string      `json:"organisation_id"`
	// DefaultReservation is Policy.DefaultReservation.
	DefaultReservation int64 `json:"default_reservation"`
}

// ParseCreate decodes and validates the body of "Create rate-limit policy".
// Wrong JSON types are reported as *FieldError naming the field, like the
// checks of ValidateBody. The returned policy has no id, status or
// timestamps yet: Store.Create fills them. Unknown fields are ignored, as
// the spec does not forbid them. For an update, decode the body onto a
// Clone of the stored record and call ValidateBody.
func ParseCreate(data []byte) (*Policy, error) {
	var b createBody
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, jsonFieldError(err)
	}
	p := &Policy{
		Conditions:     b.Conditions,
		GroupBy:        b.GroupBy,
		Type:           b.Type,
		Unit:           b.Unit,
		Value:          b.Value,
		Name:           b.Name,
		WorkspaceID:    b.WorkspaceID,
		OrganisationID: b.OrganisationID,

		DefaultReservation: b.DefaultReservation,
	}
	if err := p.ValidateBody(); err != nil {
		return nil, err
	}
	return p, nil
}

// jsonFieldError turns a decoding error into a *FieldError, naming the field
// for type mismatches and "body" for malformed JSON.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fieldErr(field, "has the wrong type ("+te.Value+")")
	}
	return fieldErr("body", "is not valid JSON")
}

// checkKey returns why key cannot be a condition or group_by key, or "".
func checkKey(key string) string {
	if key == "" {
		return "is required"
	}
	if isAllowedKey(key) {
		return ""
	}
	return "must be one of workspace_id, organisation_id, api_key, virtual_key, provider, model, config_id, metadata.<key>"
}

// validUUID accepts only the canonical 36-character form, so ids are safe
// to use in storage keys and compare as strings.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// decodePolicy reads a stored record.
func decodePolicy(data []byte) (*Policy, error) {
	var p Policy
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
