// Package ratelimit is the llm_ratelimit Caddy handler and the rate-limit
// policy management API.
//
// The handler runs before llm_gateway. For each request it finds the
// active policies that match (those created through the API, kept in the
// llm app's policy store, plus those declared in the Caddyfile), admits the
// request against every one of them in the llm app's limiter (in process,
// or Redis when `llm { redis … }` is set) and answers 429 when one refuses.
// Token policies reserve an estimate at admission and are settled against
// the provider's reported usage once the gateway has answered.
//
// The API (POST, GET, PUT, DELETE under /v1/policies/rate-limits) is
// registered with the control plane at init and served by llm_gateway
// after it authenticated the caller.
package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// DefaultMaxRequestBody is the largest body the handler reads to learn the
// model and estimate tokens, the same default as llm_gateway's limit. A
// larger body is left for the gateway, which rejects it with a 413.
const DefaultMaxRequestBody = 32 << 20

func init() {
	caddy.RegisterModule(Handler{})
	caddy.RegisterModule(BudgetStage{})
	httpcaddyfile.RegisterHandlerDirective("llm_ratelimit", parseCaddyfile)
	// After basic_auth, so a site's own authentication runs first and
	// rejected requests never spend anyone's budget.
	httpcaddyfile.RegisterDirectiveOrder("llm_ratelimit", httpcaddyfile.After, "basic_auth")
}

// Handler is the llm_ratelimit HTTP handler (module
// http.handlers.llm_ratelimit). A route without it enforces no policy.
type Handler struct {
	// Policies are declared in the Caddyfile (static): they are enforced
	// on this route in addition to the policies created through the API,
	// are not visible through the API, and keep their counters across
	// reloads because their id is derived from their name.
	Policies []*StaticPolicy `json:"policies,omitempty"`
	// MaxRequestBody bounds the body read for the model and the token
	// estimate, in bytes (default DefaultMaxRequestBody).
	MaxRequestBody int64 `json:"max_request_body,omitempty"`
	// DefaultOutputTokens is the output a tokens or cost policy reserves
	// for a generation request that sets no output bound, unless the
	// policy sets default_reservation (default DefaultOutputTokens).
	DefaultOutputTokens int64 `json:"default_output_tokens,omitempty"`
	// ReservationLease bounds how long a tokens or cost policy's
	// reservation counts before it is settled (default
	// DefaultReservationLease, and never more than half the policy's
	// window): a request whose instance died never settles, and its
	// reservation is given back once the lease has run out instead of
	// when it leaves the window, a day later for a daily policy. A
	// request still running then is charged what it used, in full, when
	// it ends. Policies whose window is shorter than four leases (per
	// minute, with the default) hold no lease: their window returns the
	// units soon enough.
	ReservationLease caddy.Duration `json:"reservation_lease,omitempty"`

	ctl    control
	static []*policies.Policy
	// configs memoises the inline configs resolved for policies that
	// read the provider, virtual key or config id.
	configs *routing.ConfigCache
	logger  *zap.Logger
	// st is the state shared by the handler's requests, behind a pointer
	// so the handler value, which Caddy copies, holds no atomics.
	st *state
	// key names the handler's admission stage in the llm app: the same
	// Caddyfile policies give the same key across reloads and restarts,
	// so managed batch lines find the stage their batch was created
	// through (app.Admission).
	key     string
	release []func()
}

// StaticPolicy is a policy declared in the Caddyfile. Its id is a name-based
// UUID (SHA-1) of Name, so every instance with the same Caddyfile shares its
// counters. It applies to every workspace and organisation unless a
// condition says otherwise.
type StaticPolicy struct {
	// Name identifies the policy; it must be unique in the handler.
	Name string `json:"name"`
	// Type is "requests" or "tokens".
	Type string `json:"type"`
	// Unit is "rpm", "rph" or "rpd".
	Unit string `json:"unit"`
	// Value is the limit per window.
	Value float64 `json:"value"`
	// Conditions restrict the requests the policy applies to; without
	// any it applies to every authenticated request.
	Conditions []policies.Condition `json:"conditions,omitempty"`
	// GroupBy names the attributes whose values get separate counters;
	// without any, each gateway key gets its own counter (api_key).
	GroupBy []policies.GroupBy `json:"group_by,omitempty"`
}

// control is what the handler needs from the llm app. *app.App implements
// it; tests and benchmarks substitute their own.
type control interface {
	Authenticate(key string) (*identity.Caller, bool)
	Policies() policies.CachedStore
	Limiter() policies.Limiter
	// FailClosed reports whether requests are rejected (503) while the
	// limiter or the policy store fails, rather than admitted.
	FailClosed() bool
	SavedConfig(id string) ([]byte, bool)
	VirtualKey(name string) (*providers.Settings, bool)
	// ControlPlane decides which requests are the management API's,
	// which are never limited.
	ControlPlane() *controlplane.Router
}

// staticNamespace is the UUID namespace of Caddyfile policy ids.
var staticNamespace = uuid.MustParse("b1d0f3c4-5e0a-4c2e-8f6b-3a9d7c2e41f0")

// StaticID returns the id of the Caddyfile policy with this name.
func StaticID(name string) string {
	return uuid.NewSHA1(staticNamespace, []byte("llm_ratelimit:"+name)).String()
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_ratelimit",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision finds the llm app and turns the Caddyfile policies into
// records the matcher and the limiter use.
func (h *Handler) Provision(ctx caddy.Context) error {
	a0, err := h.provisionBase(ctx)
	if err != nil {
		return err
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %v", err)
	}
	if h.static, err = buildStatic(h.Policies); err != nil {
		return err
	}
	h.key = admissionKey(h.Policies, h.MaxRequestBody)
	// Managed batch lines pass this handler's policies through Admit;
	// the API-only view serves lines whose route is gone.
	api := *h
	api.Policies, api.static, api.release = nil, nil, nil
	h.release = []func(){a0.RegisterAdmission(h.key, h), a0.RegisterAdmission(app.APIAdmissionKey, &api)}
	return nil
}

// provisionBase sets up what describing and admitting a request needs,
// for the handler and for the budget stage (BudgetStage): the logger,
// the shared state, the config cache, the body bound and the llm app.
func (h *Handler) provisionBase(ctx caddy.Context) (*app.App, error) {
	h.logger = ctx.Logger()
	h.st = new(state)
	h.configs = routing.NewConfigCache(1024)
	if h.MaxRequestBody <= 0 {
		h.MaxRequestBody = DefaultMaxRequestBody
	}
	a, err := ctx.App(app.ID)
	if err != nil {
		return nil, fmt.Errorf("loading llm app: %v", err)
	}
	h.ctl = appControl{a.(*app.App)}
	return a.(*app.App), nil
}

// Cleanup removes the handler's admission stages from the llm app.
func (h *Handler) Cleanup() error {
	for _, release := range h.release {
		release()
	}
	h.release = nil
	return nil
}

// admissionKey derives the stage key from the handler's configuration:
// "rl-" and the first 16 hex digits of the SHA-256 of its JSON.
func admissionKey(static []*StaticPolicy, maxBody int64) string {
	b, _ := json.Marshal(struct {
		P []*StaticPolicy `json:"p"`
		M int64           `json:"m"`
	}{static, maxBody})
	sum := sha256.Sum256(b)
	return "rl-" + hex.EncodeToString(sum[:8])
}

// buildStatic validates the Caddyfile policies and fills their defaults.
func buildStatic(in []*StaticPolicy) ([]*policies.Policy, error) {
	out := make([]*policies.Policy, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, sp := range in {
		if sp == nil || sp.Name == "" {
			return nil, fmt.Errorf("policies[%d]: name is required", i)
		}
		if seen[sp.Name] {
			return nil, fmt.Errorf("policy %q: duplicate name", sp.Name)
		}
		seen[sp.Name] = true
		p, err := sp.policy()
		if err != nil {
			return nil, fmt.Errorf("policy %q: %v", sp.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// policy returns the record the handler enforces for sp.
func (sp *StaticPolicy) policy() (*policies.Policy, error) {
	name := sp.Name
	p := &policies.Policy{
		ID:         StaticID(name),
		Type:       sp.Type,
		Unit:       sp.Unit,
		Value:      sp.Value,
		Status:     policies.StatusActive,
		Name:       &name,
		Conditions: append([]policies.Condition(nil), sp.Conditions...),
		GroupBy:    append([]policies.GroupBy(nil), sp.GroupBy...),
	}
	// The API requires conditions and group_by; a Caddyfile policy may
	// leave them out, meaning "every request" and "per gateway key".
	// api_key is present on every authenticated request, so "*" on it
	// matches them all.
	if len(p.Conditions) == 0 {
		p.Conditions = []policies.Condition{{Key: policies.KeyAPIKey, Value: "*"}}
	}
	if len(p.GroupBy) == 0 {
		p.GroupBy = []policies.GroupBy{{Key: policies.KeyAPIKey}}
	}
	if err := p.ValidateBody(); err != nil {
		return nil, err
	}
	return p, nil
}

// Validate implements caddy.Validator.
func (h *Handler) Validate() error {
	if h.MaxRequestBody < 0 {
		return fmt.Errorf("max_request_body must not be negative")
	}
	return nil
}

// appControl adapts *app.App to control.
type appControl struct{ *app.App }

// FailClosed implements control. Only a Redis-backed limiter can become
// unreachable; its operator chooses the mode (`fail_open`/`fail_closed`,
// closed by default). The in-process limiter never fails, and a storage
// store that cannot be read keeps serving its last policy set.
func (a appControl) FailClosed() bool {
	return a.RedisClient() != nil && !a.RedisFailOpen()
}

// Interface guards.
var (
	_ caddy.Module                = (*Handler)(nil)
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ app.Admission               = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddy.Provisioner           = (*BudgetStage)(nil)
	_ app.BudgetStage             = (*BudgetStage)(nil)
)
