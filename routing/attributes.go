package routing

import "github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"

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

// DestinationOf resolves the headers with Resolve, so its precedence
// (config, then virtual key, then provider) is the gateway's, and
// summarises the plan. Headers the gateway would refuse give what the
// headers alone say; the gateway answers such requests with an error.
func DestinationOf(h *ingress.Headers, r Resolver, cache *ConfigCache) Destination {
	d := Destination{VirtualKey: h.VirtualKey}
	plan, err := Resolve(h, r, cache)
	if err != nil || len(plan.Leaves) == 0 {
		return d
	}
	d.ConfigID = plan.ConfigID
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
