// Package routing turns the spec's configuration object into a Plan, a tree
// of strategy nodes and leaf targets with inheritance already applied, and
// walks it with the routing strategies.
package routing

import (
	"encoding/json"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Config is the spec's configuration object. It is decoded only after the
// schema has accepted the raw JSON, so its fields can be trusted to have
// the spec's types and bounds.
type Config struct {
	providers.Settings

	Name                   string                     `json:"name,omitempty"`
	StrictOpenAICompliance *bool                      `json:"strict_open_ai_compliance,omitempty"`
	VirtualKey             string                     `json:"virtual_key,omitempty"`
	PromptID               string                     `json:"prompt_id,omitempty"`
	RequestTimeout         int64                      `json:"request_timeout,omitempty"`
	ForwardHeaders         []string                   `json:"forward_headers,omitempty"`
	OverrideParams         map[string]json.RawMessage `json:"override_params,omitempty"`
	Weight                 *float64                   `json:"weight,omitempty"`
	OnStatusCodes          []int                      `json:"on_status_codes,omitempty"`
	Targets                []*Config                  `json:"targets,omitempty"`
	Strategy               *Strategy                  `json:"strategy,omitempty"`
	Cache                  *Cache                     `json:"cache,omitempty"`
	Retry                  *Retry                     `json:"retry,omitempty"`
	CBConfig               *CBConfig                  `json:"cb_config,omitempty"`

	BeforeRequestHooks []json.RawMessage `json:"before_request_hooks,omitempty"`
	AfterRequestHooks  []json.RawMessage `json:"after_request_hooks,omitempty"`
	InputGuardrails    []json.RawMessage `json:"input_guardrails,omitempty"`
	OutputGuardrails   []json.RawMessage `json:"output_guardrails,omitempty"`
}

// Strategy modes.
const (
	ModeSingle      = "single"
	ModeLoadBalance = "loadbalance"
	ModeFallback    = "fallback"
	ModeConditional = "conditional"
)

// Strategy says how a node picks among its targets.
type Strategy struct {
	Mode          string      `json:"mode"`
	Conditions    []Condition `json:"conditions,omitempty"`
	Default       string      `json:"default,omitempty"`
	OnStatusCodes []int       `json:"on_status_codes,omitempty"`
	// LoadBalance is the gateway's extension naming how a loadbalance
	// node picks (BalanceWeighted, the spec's behaviour and the default;
	// BalanceLeastLatency, BalanceLeastInflight, BalanceCheapest). Only
	// mode loadbalance reads it.
	LoadBalance string `json:"loadbalance,omitempty"`
	// OnErrorTypes is the gateway's extension beside on_status_codes: a
	// fallback also moves on when the failed answer's class
	// (providers.ErrorClass) is listed. Only fallback reads it.
	OnErrorTypes []providers.ErrorClass `json:"on_error_types,omitempty"`
	// Affinity is the gateway's extension keeping a session's requests
	// on one target of a loadbalance node (affinity.go), so the
	// provider's prompt cache stays warm. Only loadbalance reads it.
	Affinity *Affinity `json:"affinity,omitempty"`
}

// Affinity configures session affinity on a loadbalance node.
type Affinity struct {
	// TTL is how long, in seconds, a session stays pinned after a replica
	// last confirmed its pin; 0 means the providers' cache lifetime
	// (DefaultAffinityTTL).
	TTL int64 `json:"ttl,omitempty"`
}

// Condition routes to the target named Then when Query matches.
type Condition struct {
	Query map[string]any `json:"query"`
	Then  string         `json:"then"`
}

// Cache configures the response cache for a target.
type Cache struct {
	Mode   string `json:"mode"`
	MaxAge *int64 `json:"max_age,omitempty"`
}

// Retry configures retries of one leaf target.
type Retry struct {
	Attempts             int   `json:"attempts"`
	OnStatusCodes        []int `json:"on_status_codes,omitempty"`
	UseRetryAfterHeaders bool  `json:"use_retry_after_headers,omitempty"`
	// UseRetryAfterHeader is the singular spelling some clients send.
	UseRetryAfterHeader bool `json:"use_retry_after_header,omitempty"`
}

// HonourRetryAfter reports whether either spelling asked for it.
func (r *Retry) HonourRetryAfter() bool {
	return r != nil && (r.UseRetryAfterHeaders || r.UseRetryAfterHeader)
}

// CBConfig configures a circuit breaker for a target.
type CBConfig struct {
	FailureThreshold   float64 `json:"failure_threshold"`
	CooldownInterval   float64 `json:"cooldown_interval"`
	FailureStatusCodes []int   `json:"failure_status_codes,omitempty"`
}
