package routing

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Plan is a request's configuration parsed into a tree. A header-only
// request is a one-leaf plan.
type Plan struct {
	Root *Node
	// ConfigID is the saved config's id when the client named one.
	ConfigID string
	// Leaves lists every leaf in tree order, for validation and logging.
	Leaves []*Target
}

// Node is one node of a Plan: a strategy over children, or a leaf target.
type Node struct {
	// Path is the node's JSON path, "config" or "config.targets[1]".
	Path     string
	Name     string
	Strategy *Strategy // nil on a leaf
	Weight   float64
	Children []*Node
	Target   *Target // set on a leaf only
}

// Target is one leaf: everything an attempt needs, with inheritance from
// its ancestors already applied.
type Target struct {
	Path             string
	Name             string
	Settings         providers.Settings
	VirtualKey       string
	PromptID         string
	RequestTimeoutMS int64
	ForwardHeaders   []string
	OverrideParams   map[string]json.RawMessage
	Retry            *Retry
	Cache            *Cache
	CB               *CBConfig
	// OnStatusCodes is the target's own on_status_codes. Routing ignores
	// it, as the reference gateway does: fallback reads the parent's
	// strategy.on_status_codes, retries retry.on_status_codes.
	OnStatusCodes          []int
	StrictOpenAICompliance *bool
	BeforeRequestHooks     []json.RawMessage
	AfterRequestHooks      []json.RawMessage
	// GuardEgress is true when an outbound address of this target derives
	// from client input (a custom host, an inline config or cloud headers
	// that set an address field), so the attempt must dial through the
	// egress guard (upstream.WithGuard, providers.Call.Egress). Addresses
	// from the operator's virtual keys and saved configs (the Caddyfile's)
	// are trusted; those of records saved through the API are not
	// (Origins).
	GuardEgress bool
	// Unfit, when set, says the request's input does not fit the context
	// window of the model this target runs (token preflight, decided
	// once when the attempts are planned): every strategy passes the
	// target over without an attempt, as it passes over an open breaker.
	Unfit *Unfit

	// identity, breakerKey and load cache derived keys and lookups; a
	// Target belongs to one request, so no lock is needed.
	identity   string
	breakerKey string
	load       *TargetLoad
}

// Unfit is why a request cannot be sent to a target: its input's
// tokens (as counted, or a bound above which the count stopped) exceed
// the window of Model.
type Unfit struct {
	Model  string
	Tokens int64
	Window int64
}

// Resolver gives the plan builder access to the control plane's records.
type Resolver interface {
	// SavedConfig returns the raw JSON of a saved configuration.
	SavedConfig(id string) ([]byte, bool)
	// VirtualKey returns the provider settings stored under name.
	VirtualKey(name string) (*providers.Settings, bool)
}

// inherited holds what a parent passes to its children (research/portkey.md
// §2.2): override_params merge shallowly, the rest are replaced whole.
type inherited struct {
	overrideParams map[string]json.RawMessage
	retry          *Retry
	cache          *Cache
	cb             *CBConfig
	requestTimeout int64
	strict         *bool
	forwardHeaders []string
	customHost     string
	beforeHooks    []json.RawMessage
	afterHooks     []json.RawMessage
}

// Resolve builds the request's Plan from its gateway headers, in this
// precedence: x-gateway-config, then x-gateway-virtual-key, then
// x-gateway-provider (with x-gateway-custom-host and Authorization).
// Header values that refine a target (cloud fields, timeout, forward
// headers, the bearer token) are applied to every leaf that lacks them.
//
// cache may be nil; with one, each distinct config is validated once.
func Resolve(h *ingress.Headers, r Resolver, cache *ConfigCache) (*Plan, error) {
	var cfg *Config
	plan := new(Plan)
	switch {
	case h.Config != "":
		raw := h.Config
		if !strings.HasPrefix(raw, "{") {
			saved, ok := r.SavedConfig(raw)
			if !ok {
				return nil, configNotFound(raw)
			}
			plan.ConfigID, raw = raw, string(saved)
		}
		var err error
		if cfg, err = cache.Parse(raw); err != nil {
			return nil, err
		}
	case h.VirtualKey != "":
		cfg = &Config{VirtualKey: h.VirtualKey}
	case h.Provider != "":
		cfg = &Config{Settings: providers.Settings{Provider: h.Provider}}
	default:
		return nil, apierror.BadRequest(ingress.Prefix+ingress.Provider,
			"no provider: set %s%s (with Authorization), %s%s or %s%s",
			ingress.Prefix, ingress.Provider, ingress.Prefix, ingress.VirtualKey, ingress.Prefix, ingress.Config)
	}
	// An inline config is client input, and so is a config saved
	// through the API; one declared in the Caddyfile is the operator's.
	untrusted := h.Config != "" && (plan.ConfigID == "" || !operatorConfig(r, plan.ConfigID))
	return finishPlan(cfg, plan, h, r, untrusted)
}

// ResolveConfig builds the plan of a configuration the gateway holds
// itself, such as a prompt version's provider settings, rather than one a
// client sent. It skips the client schema, whose required-key groups would
// refuse {"provider": …} alone: a prompt stores no credentials by design,
// and the request's Authorization header supplies them. The headers refine
// the leaves as in Resolve. Prompts are written through the API by clients,
// so their address fields are guarded like an inline config's.
func ResolveConfig(cfg *Config, h *ingress.Headers, r Resolver) (*Plan, error) {
	return finishPlan(cfg, new(Plan), h, r, true)
}

func finishPlan(cfg *Config, plan *Plan, h *ingress.Headers, r Resolver, untrusted bool) (*Plan, error) {
	plan.Root = build(cfg, "config", &inherited{}, plan)
	if err := validatePlan(plan.Root); err != nil {
		return nil, err
	}
	for _, t := range plan.Leaves {
		t.GuardEgress = untrusted && HasAddress(&t.Settings)
		if err := finishTarget(t, h, r); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

func build(c *Config, path string, parent *inherited, plan *Plan) *Node {
	in := *parent
	if len(c.OverrideParams) > 0 {
		merged := make(map[string]json.RawMessage, len(in.overrideParams)+len(c.OverrideParams))
		maps.Copy(merged, in.overrideParams)
		maps.Copy(merged, c.OverrideParams)
		in.overrideParams = merged
	}
	if c.Retry != nil {
		in.retry = c.Retry
	}
	if c.Cache != nil {
		in.cache = c.Cache
	}
	if c.CBConfig != nil {
		in.cb = c.CBConfig
	}
	if c.RequestTimeout > 0 {
		in.requestTimeout = c.RequestTimeout
	}
	if c.StrictOpenAICompliance != nil {
		in.strict = c.StrictOpenAICompliance
	}
	if len(c.ForwardHeaders) > 0 {
		in.forwardHeaders = c.ForwardHeaders
	}
	if c.CustomHost != "" {
		in.customHost = c.CustomHost
	}
	if hooks := append(append([]json.RawMessage(nil), c.BeforeRequestHooks...), c.InputGuardrails...); len(hooks) > 0 {
		in.beforeHooks = hooks
	}
	if hooks := append(append([]json.RawMessage(nil), c.AfterRequestHooks...), c.OutputGuardrails...); len(hooks) > 0 {
		in.afterHooks = hooks
	}

	n := &Node{Path: path, Name: c.Name, Weight: 1}
	if c.Weight != nil {
		n.Weight = *c.Weight
	}
	if len(c.Targets) > 0 {
		n.Strategy = c.Strategy
		if n.Strategy == nil {
			n.Strategy = &Strategy{Mode: ModeSingle}
		}
		n.Children = make([]*Node, len(c.Targets))
		for i, child := range c.Targets {
			n.Children[i] = build(child, path+".targets["+strconv.Itoa(i)+"]", &in, plan)
		}
		return n
	}
	t := &Target{
		Path:                   path,
		Name:                   c.Name,
		Settings:               c.Settings,
		VirtualKey:             c.VirtualKey,
		PromptID:               c.PromptID,
		RequestTimeoutMS:       in.requestTimeout,
		ForwardHeaders:         in.forwardHeaders,
		OverrideParams:         in.overrideParams,
		Retry:                  in.retry,
		Cache:                  in.cache,
		CB:                     in.cb,
		OnStatusCodes:          c.OnStatusCodes,
		StrictOpenAICompliance: in.strict,
		BeforeRequestHooks:     in.beforeHooks,
		AfterRequestHooks:      in.afterHooks,
	}
	t.Settings.CustomHost = in.customHost
	n.Target = t
	plan.Leaves = append(plan.Leaves, t)
	return n
}

// finishTarget applies the virtual key and the request headers to a leaf
// and checks that it names a provider the gateway knows.
func finishTarget(t *Target, h *ingress.Headers, r Resolver) error {
	if t.VirtualKey != "" {
		vk, ok := r.VirtualKey(t.VirtualKey)
		if !ok {
			return apierror.Newf(404, apierror.TypeNotFound, "virtual key %s not found (%s)", apierror.QuoteID(t.VirtualKey), t.Path).WithCode("virtual_key_not_found")
		}
		t.Settings.Inherit(vk)
		if !operatorVirtualKey(r, t.VirtualKey) && HasAddress(vk) {
			// A virtual key saved through the API is client input.
			t.GuardEgress = true
		}
	}
	if t.Settings.Provider == "" {
		t.Settings.Provider = h.Provider
	}
	if t.Settings.APIKey == "" && t.VirtualKey == "" {
		t.Settings.APIKey = h.Authorization
	}
	if h.CustomHost != "" && t.Settings.CustomHost == "" {
		t.Settings.CustomHost = h.CustomHost
		t.GuardEgress = true
	}
	for field, v := range h.Cloud {
		before := t.Settings
		t.Settings.FillField(field, v)
		if addressFields[field] && !sameAddress(&before, &t.Settings) {
			t.GuardEgress = true
		}
	}
	if h.RequestTimeoutMS > 0 {
		t.RequestTimeoutMS = h.RequestTimeoutMS
	}
	if len(h.ForwardHeaders) > 0 {
		t.ForwardHeaders = h.ForwardHeaders
	}
	if t.Settings.Provider == "" {
		if t.PromptID != "" {
			// The prompt's saved provider applies; the gateway fills it in
			// once it knows the caller's workspace (prompts are scoped).
			return nil
		}
		return apierror.BadRequest(t.Path+".provider", "%s names no provider: set provider, virtual_key or the %s%s header", t.Path, ingress.Prefix, ingress.Provider)
	}
	return CheckProvider(t)
}

// CheckProvider normalises a target's provider slug and checks the
// gateway knows it.
func CheckProvider(t *Target) error {
	t.Settings.Provider = strings.ToLower(t.Settings.Provider)
	if _, ok := providers.Lookup(t.Settings.Provider); !ok {
		return apierror.BadRequest(t.Path+".provider", "unknown provider %s", apierror.QuoteID(t.Settings.Provider)).WithCode("unknown_provider")
	}
	return nil
}

// configNotFound is the 404 for an x-gateway-config value that is neither
// a JSON object nor a saved id. Only a short id-shaped value is quoted: a
// malformed inline config can carry credentials, and a header can be large.
func configNotFound(v string) error {
	msg := "the " + ingress.Prefix + ingress.Config + " value is neither a JSON object nor a saved config id"
	if apierror.IDShaped(v) {
		msg = "config " + apierror.QuoteID(v) + " not found"
	}
	return apierror.New(404, apierror.TypeNotFound, msg).WithCode("config_not_found")
}
