package routing

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// originResolver is fakeResolver that tells records saved through the
// API (api, "vk:name" or "config:id") from the operator's (Origins).
type originResolver struct {
	fakeResolver
	api map[string]bool
}

func (o originResolver) OperatorVirtualKey(name string) bool { return !o.api["vk:"+name] }
func (o originResolver) OperatorConfig(id string) bool       { return !o.api["config:"+id] }

func TestGuardEgress(t *testing.T) {
	records := fakeResolver{
		configs: map[string]string{
			"saved-host":     `{"provider":"openai","api_key":"k","custom_host":"http://10.0.0.5/v1"}`,
			"saved-vk":       `{"virtual_key":"vk-host"}`,
			"api-host":       `{"provider":"openai","api_key":"k","custom_host":"http://10.0.0.5/v1"}`,
			"api-plain":      `{"provider":"openai","api_key":"k"}`,
			"api-via-vk":     `{"virtual_key":"vk-plain"}`,
			"saved-via-api":  `{"virtual_key":"api-vk-host"}`,
			"api-service-ac": `{"provider":"openai","api_key":"k","cloudc_region":"r","cloudc_service_account_json":{"type":"service_account"}}`,
		},
		vks: map[string]*providers.Settings{
			"vk-host":      {Provider: "openai", APIKey: "k", CustomHost: "http://10.0.0.5/v1"},
			"vk-plain":     {Provider: "openai", APIKey: "k"},
			"api-vk-host":  {Provider: "openai", APIKey: "k", CustomHost: "http://10.0.0.5/v1"},
			"api-vk-plain": {Provider: "openai", APIKey: "k"},
			"api-vk-sa":    {Provider: "openai", APIKey: "k", CloudCRegion: "r", CloudCServiceAccountJSON: []byte(`{"type":"service_account"}`)},
		},
	}
	r := originResolver{fakeResolver: records, api: map[string]bool{
		"config:api-host": true, "config:api-plain": true, "config:api-via-vk": true, "config:api-service-ac": true,
		"vk:api-vk-host": true, "vk:api-vk-plain": true, "vk:api-vk-sa": true,
	}}
	tests := []struct {
		name    string
		headers []string
		want    []bool // per leaf
	}{
		{"provider header only", []string{"x-gateway-provider", "openai", "Authorization", "Bearer k"}, []bool{false}},
		{"custom host header", []string{"x-gateway-provider", "openai", "Authorization", "Bearer k", "x-gateway-custom-host", "http://127.0.0.1:1/v1"}, []bool{true}},
		{"cloud region header", []string{"x-gateway-provider", "openai", "Authorization", "Bearer k", "x-gateway-cloudc-region", "us-east1"}, []bool{true}},
		{"azure resource header", []string{"x-gateway-provider", "openai", "Authorization", "Bearer k", "x-gateway-cloudb-resource-name", "res"}, []bool{true}},
		{"non-address cloud header", []string{"x-gateway-provider", "openai", "Authorization", "Bearer k", "x-gateway-cloudb-api-version", "2024-01-01"}, []bool{false}},
		{"operator virtual key with custom host", []string{"x-gateway-virtual-key", "vk-host"}, []bool{false}},
		{"virtual key, header overrides nothing it set", []string{"x-gateway-virtual-key", "vk-host", "x-gateway-custom-host", "http://127.0.0.1:1/v1"}, []bool{false}},
		{"virtual key, header fills an empty address", []string{"x-gateway-virtual-key", "vk-plain", "x-gateway-custom-host", "http://127.0.0.1:1/v1"}, []bool{true}},
		{"saved config with custom host", []string{"x-gateway-config", "saved-host"}, []bool{false}},
		{"saved config through a virtual key", []string{"x-gateway-config", "saved-vk"}, []bool{false}},
		{"inline config custom host", []string{"x-gateway-config", `{"provider":"openai","api_key":"k","custom_host":"http://127.0.0.1:1/v1"}`}, []bool{true}},
		{"inline config without address", []string{"x-gateway-config", `{"provider":"openai","api_key":"k"}`}, []bool{false}},
		{"inline config naming an operator key", []string{"x-gateway-config", `{"virtual_key":"vk-host"}`}, []bool{false}},
		{"inline config, inherited custom host", []string{"x-gateway-config", `{"strategy":{"mode":"fallback"},"custom_host":"http://127.0.0.1:1/v1","targets":[{"virtual_key":"vk-plain"},{"provider":"openai","api_key":"k"}]}`}, []bool{true, true}},
		{"inline config, one leaf with a region", []string{"x-gateway-config", `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"vk-plain"},{"provider":"openai","api_key":"k","cloudc_region":"x"}]}`}, []bool{false, true}},
		// Records saved through the API are client input.
		{"API virtual key with custom host", []string{"x-gateway-virtual-key", "api-vk-host"}, []bool{true}},
		{"API virtual key with a service account", []string{"x-gateway-virtual-key", "api-vk-sa"}, []bool{true}},
		{"API virtual key without address", []string{"x-gateway-virtual-key", "api-vk-plain"}, []bool{false}},
		{"API config with custom host", []string{"x-gateway-config", "api-host"}, []bool{true}},
		{"API config with a service account", []string{"x-gateway-config", "api-service-ac"}, []bool{true}},
		{"API config without address", []string{"x-gateway-config", "api-plain"}, []bool{false}},
		{"API config through an operator key", []string{"x-gateway-config", "api-via-vk"}, []bool{false}},
		{"operator config through an API key", []string{"x-gateway-config", "saved-via-api"}, []bool{true}},
		{"inline config naming an API key", []string{"x-gateway-config", `{"virtual_key":"api-vk-sa"}`}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				h.Set(tt.headers[i], tt.headers[i+1])
			}
			in, err := ingress.Parse(h)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Resolve(in, r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Leaves) != len(tt.want) {
				t.Fatalf("%d leaves", len(p.Leaves))
			}
			for i, l := range p.Leaves {
				if l.GuardEgress != tt.want[i] {
					t.Errorf("leaf %s: GuardEgress = %v, want %v", l.Path, l.GuardEgress, tt.want[i])
				}
			}
		})
	}
	p, err := ResolveConfig(&Config{Settings: providers.Settings{Provider: "openai", CustomHost: "http://127.0.0.1:1"}}, &ingress.Headers{}, r)
	if err != nil || !p.Leaves[0].GuardEgress {
		t.Fatalf("a prompt's custom host must be guarded: %v", err)
	}
	// A resolver that cannot tell origins has its records guarded.
	p, err = Resolve(&ingress.Headers{VirtualKey: "vk-host"}, records, nil)
	if err != nil || !p.Leaves[0].GuardEgress {
		t.Fatalf("a record of unknown origin must be guarded: %v", err)
	}
}
