package ingress

import (
	"encoding/json"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// ApplyDefaults routes a request that names no config, virtual key or
// provider by its key's default config (else virtual key), and puts the
// key's default metadata under the request's: a request's own value of a
// metadata key wins. It is the one place a key's defaults become part of
// a request's route: llm_gateway routes by the headers it leaves, and
// llm_ratelimit describes (and prices) the request by the same headers,
// so a request routed by its key's defaults is limited and reserved as
// one that names the same route in headers. Nil defaults change nothing.
func (h *Headers) ApplyDefaults(d *identity.Defaults) {
	if d == nil || h == nil {
		return
	}
	if h.Config == "" && h.VirtualKey == "" && h.Provider == "" {
		if d.ConfigID != "" {
			h.Config = d.ConfigID
		} else {
			h.VirtualKey = d.VirtualKey
		}
	}
	if len(d.Metadata) == 0 {
		return
	}
	merged := make(map[string]string, len(d.Metadata)+len(h.Metadata))
	for k, v := range d.Metadata {
		merged[k] = v
	}
	for k, v := range h.Metadata {
		merged[k] = v
	}
	raw := h.MetadataRaw
	if raw == "" {
		raw = "{}"
	}
	// The raw form keeps the request's own JSON (nested values) and adds
	// the defaults it lacks.
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(strings.TrimSpace(raw), "}"))
	first := strings.TrimSpace(raw) == "{}"
	for k, v := range d.Metadata {
		if _, own := h.Metadata[k]; own {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(v)
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	h.Metadata, h.MetadataRaw = merged, b.String()
}
