package routing

import (
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Destination is where a request's gateway headers send it, as far as one
// value can say: what rate-limit policies match and group on.
type Destination struct {
	// Provider is the provider every leaf of the plan uses; empty when
	// the leaves use different providers or the plan cannot be built.
	Provider string
	// VirtualKey is the x-gateway-virtual-key header, or else the virtual
	// key every leaf of the plan uses.
	VirtualKey string
	// ConfigID is the saved config's id when the client named one.
	ConfigID string
}

// DestinationOf summarises the plan Resolve builds from the headers, so
// its precedence (config, then virtual key, then provider) is the
// gateway's. Headers the gateway would refuse give what the headers alone
// say; the gateway answers such requests with an error. Without a config
// it reads the one leaf Resolve would build directly, which allocates
// nothing (TestDestinationOfMatchesResolve holds the two equal).
func DestinationOf(h *ingress.Headers, r Resolver, cache *ConfigCache) Destination {
	if h.Config == "" {
		return headerDestination(h, r)
	}
	d := Destination{VirtualKey: h.VirtualKey}
	plan, err := Resolve(h, r, cache)
	if err != nil || len(plan.Leaves) == 0 {
		return d
	}
	return planDestination(plan, h)
}

// planDestination summarises a plan's leaves.
func planDestination(plan *Plan, h *ingress.Headers) Destination {
	d := Destination{VirtualKey: h.VirtualKey, ConfigID: plan.ConfigID}
	first := plan.Leaves[0]
	d.Provider = first.Settings.Provider
	vk := first.VirtualKey
	for _, t := range plan.Leaves[1:] {
		if t.Settings.Provider != d.Provider {
			d.Provider = ""
		}
		if t.VirtualKey != vk {
			vk = ""
		}
	}
	if d.VirtualKey == "" {
		d.VirtualKey = vk
	}
	return d
}

// headerDestination is the leaf of a header-only request as finishTarget
// fills it: the virtual key's provider, else the provider header,
// lower-cased and known to the gateway.
func headerDestination(h *ingress.Headers, r Resolver) Destination {
	d := Destination{VirtualKey: h.VirtualKey}
	provider := h.Provider
	if h.VirtualKey != "" {
		vk, ok := r.VirtualKey(h.VirtualKey)
		if !ok {
			return d
		}
		if vk.Provider != "" {
			provider = vk.Provider
		}
	}
	provider = strings.ToLower(provider)
	if _, ok := providers.Lookup(provider); ok && provider != "" {
		d.Provider = provider
	}
	return d
}
