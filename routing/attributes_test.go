package routing

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestDestinationOfMatchesResolve checks DestinationOf against the plan
// Resolve builds for the same headers, so its header-only shortcut cannot
// drift from the gateway's precedence, and its summary of several leaves.
func TestDestinationOfMatchesResolve(t *testing.T) {
	r := fakeResolver{
		configs: testResolver.configs,
		vks: map[string]*providers.Settings{
			"vk-openai": testResolver.vks["vk-openai"],
			"vk-upper":  {Provider: "OpenAI", APIKey: "k"},
			"vk-none":   {APIKey: "k"},
		},
	}
	r.configs["pc-one"] = `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"vk-openai"},{"virtual_key":"vk-openai"}]}`
	tests := []struct {
		name string
		kv   []string
		want Destination
	}{
		{"provider", []string{"x-gateway-provider", "openai"}, Destination{Provider: "openai"}},
		{"provider upper case", []string{"x-gateway-provider", "OpenAI"}, Destination{Provider: "openai"}},
		{"unknown provider", []string{"x-gateway-provider", "nope"}, Destination{}},
		{"nothing", nil, Destination{}},
		{"virtual key", []string{"x-gateway-virtual-key", "vk-openai"}, Destination{Provider: "openai", VirtualKey: "vk-openai"}},
		{"virtual key over provider", []string{"x-gateway-virtual-key", "vk-openai", "x-gateway-provider", "groq"}, Destination{Provider: "openai", VirtualKey: "vk-openai"}},
		{"virtual key without provider", []string{"x-gateway-virtual-key", "vk-none", "x-gateway-provider", "groq"}, Destination{Provider: "groq", VirtualKey: "vk-none"}},
		{"virtual key upper case", []string{"x-gateway-virtual-key", "vk-upper"}, Destination{Provider: "openai", VirtualKey: "vk-upper"}},
		{"unknown virtual key", []string{"x-gateway-virtual-key", "vk-x", "x-gateway-provider", "openai"}, Destination{VirtualKey: "vk-x"}},
		{"alias prefix", []string{"x-portkey-provider", "openai"}, Destination{Provider: "openai"}},
		{"saved config of two providers", []string{"x-gateway-config", "pc-fallback"}, Destination{ConfigID: "pc-fallback"}},
		{"saved config of one provider", []string{"x-gateway-config", "pc-one"}, Destination{Provider: "openai", VirtualKey: "vk-openai", ConfigID: "pc-one"}},
		{"config over headers", []string{"x-gateway-config", `{"virtual_key":"vk-openai"}`, "x-gateway-provider", "groq"}, Destination{Provider: "openai", VirtualKey: "vk-openai"}},
		{"unknown config", []string{"x-gateway-config", "pc-x", "x-gateway-provider", "openai"}, Destination{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{}
			for i := 0; i+1 < len(tt.kv); i += 2 {
				hdr.Set(tt.kv[i], tt.kv[i+1])
			}
			h, err := ingress.Parse(hdr)
			if err != nil {
				t.Fatal(err)
			}
			got := DestinationOf(h, r, NewConfigCache(8))
			if got != tt.want {
				t.Fatalf("DestinationOf = %+v, want %+v", got, tt.want)
			}
			// The same as the plan's own summary, or nothing when the
			// gateway refuses the headers.
			plan, err := Resolve(h, r, nil)
			want := Destination{VirtualKey: h.VirtualKey}
			if err == nil {
				want = planDestination(plan, h)
			}
			if got != want {
				t.Fatalf("DestinationOf = %+v, Resolve says %+v", got, want)
			}
		})
	}
}
