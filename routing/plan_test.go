package routing

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/openaicompat"
)

type fakeResolver struct {
	configs map[string]string
	vks     map[string]*providers.Settings
}

func (f fakeResolver) SavedConfig(id string) ([]byte, bool) {
	c, ok := f.configs[id]
	return []byte(c), ok
}

func (f fakeResolver) VirtualKey(name string) (*providers.Settings, bool) {
	s, ok := f.vks[name]
	return s, ok
}

var testResolver = fakeResolver{
	configs: map[string]string{
		"pc-fallback": `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"vk-openai"},{"provider":"groq","api_key":"gk"}]}`,
	},
	vks: map[string]*providers.Settings{
		"vk-openai": {Provider: "openai", APIKey: "sk-vk", VendorOrganization: "org-1"},
	},
}

func resolveHeaders(t *testing.T, kv ...string) (*Plan, error) {
	t.Helper()
	// The gateway key comes in its own header, so Authorization (or the
	// x-portkey alias's) carries the provider key; without it the client's
	// Authorization would be the gateway key (docs/keys.md).
	h := http.Header{"X-Gateway-Api-Key": {"gw-test"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	in, err := ingress.Parse(h)
	if err != nil {
		t.Fatal(err)
	}
	return Resolve(in, testResolver, nil)
}

func TestResolveWays(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		leaves  []string // provider/apiKey/customHost per leaf
		paths   []string
	}{
		{"way 1: provider + bearer", []string{"x-gateway-provider", "openai", "Authorization", "Bearer sk-1"},
			[]string{"openai/sk-1/"}, []string{"config"}},
		{"way 2: virtual key", []string{"x-gateway-virtual-key", "vk-openai", "Authorization", "Bearer ignored"},
			[]string{"openai/sk-vk/"}, []string{"config"}},
		{"way 3: inline config", []string{"x-gateway-config", `{"provider":"groq","api_key":"g1"}`},
			[]string{"groq/g1/"}, []string{"config"}},
		{"way 3: saved config id", []string{"x-gateway-config", "pc-fallback"},
			[]string{"openai/sk-vk/", "groq/gk/"}, []string{"config.targets[0]", "config.targets[1]"}},
		{"way 4: custom host + provider + bearer", []string{"x-gateway-provider", "openai-compatible", "x-gateway-custom-host", "http://127.0.0.1:8000", "Authorization", "Bearer t"},
			[]string{"openai-compatible/t/http://127.0.0.1:8000"}, []string{"config"}},
		{"config wins over virtual key and provider", []string{"x-gateway-config", `{"provider":"groq","api_key":"g1"}`, "x-gateway-virtual-key", "vk-openai", "x-gateway-provider", "openai"},
			[]string{"groq/g1/"}, []string{"config"}},
		{"virtual key wins over provider", []string{"x-gateway-virtual-key", "vk-openai", "x-gateway-provider", "groq"},
			[]string{"openai/sk-vk/"}, []string{"config"}},
		{"config without api_key takes the bearer token", []string{"x-gateway-config", `{"provider":"groq","custom_host":"http://h"}`, "Authorization", "Bearer tok"},
			[]string{"groq/tok/http://h"}, []string{"config"}},
		{"aliases", []string{"x-portkey-provider", "openai", "Authorization", "sk-2"},
			[]string{"openai/sk-2/"}, []string{"config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := resolveHeaders(t, tt.headers...)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Leaves) != len(tt.leaves) {
				t.Fatalf("leaves = %d, want %d", len(p.Leaves), len(tt.leaves))
			}
			for i, l := range p.Leaves {
				got := l.Settings.Provider + "/" + l.Settings.APIKey + "/" + l.Settings.CustomHost
				if got != tt.leaves[i] || l.Path != tt.paths[i] {
					t.Errorf("leaf %d = %s at %s, want %s at %s", i, got, l.Path, tt.leaves[i], tt.paths[i])
				}
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		status  int
		msg     string
	}{
		{"nothing names a provider", []string{"Authorization", "Bearer x"}, 400, "no provider"},
		{"unknown provider", []string{"x-gateway-provider", "nope"}, 400, `unknown provider "nope"`},
		{"unknown virtual key", []string{"x-gateway-virtual-key", "missing"}, 404, `virtual key "missing" not found`},
		{"unknown saved config", []string{"x-gateway-config", "pc-missing"}, 404, `config "pc-missing" not found`},
		{"invalid inline config", []string{"x-gateway-config", `{"provider":"openai","api_key":"k","bogus":1}`}, 400, "bogus"},
		{"malformed inline config", []string{"x-gateway-config", `{"provider":`}, 400, "JSON object"},
		{"nested target without provider", []string{"x-gateway-config", `{"strategy":{"mode":"fallback"},"targets":[{"retry":{"attempts":1}}]}`}, 400, "config.targets[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveHeaders(t, tt.headers...)
			e, ok := err.(*apierror.Error)
			if !ok {
				t.Fatalf("want *apierror.Error, got %v", err)
			}
			if e.Status != tt.status || !strings.Contains(e.Message, tt.msg) {
				t.Fatalf("got %d %q, want %d containing %q", e.Status, e.Message, tt.status, tt.msg)
			}
		})
	}
}

func TestResolveInheritance(t *testing.T) {
	cfg := `{"retry":{"attempts":2},"request_timeout":500,"override_params":{"temperature":0.1,"model":"a"},
		"custom_host":"http://parent","strategy":{"mode":"fallback"},
		"targets":[
			{"provider":"openai","api_key":"k1","override_params":{"model":"b"}},
			{"provider":"groq","api_key":"k2","retry":{"attempts":0},"request_timeout":100,"custom_host":"http://child"}
		]}`
	p, err := resolveHeaders(t, "x-gateway-config", cfg, "x-gateway-forward-headers", "X-Trace")
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Leaves[0], p.Leaves[1]
	if a.Retry.Attempts != 2 || a.RequestTimeoutMS != 500 || a.Settings.CustomHost != "http://parent" {
		t.Fatalf("leaf 0 did not inherit: %+v", a)
	}
	if string(a.OverrideParams["model"]) != `"b"` || string(a.OverrideParams["temperature"]) != "0.1" {
		t.Fatalf("override_params not merged shallowly: %v", a.OverrideParams)
	}
	if b.Retry.Attempts != 0 || b.RequestTimeoutMS != 100 || b.Settings.CustomHost != "http://child" {
		t.Fatalf("leaf 1 did not override: %+v", b)
	}
	if len(a.ForwardHeaders) != 1 || a.ForwardHeaders[0] != "X-Trace" {
		t.Fatalf("header forward_headers not applied: %v", a.ForwardHeaders)
	}
}

func TestRequestTimeoutHeaderWins(t *testing.T) {
	p, err := resolveHeaders(t, "x-gateway-config", `{"provider":"openai","api_key":"k","request_timeout":5000}`, "x-gateway-request-timeout", "250")
	if err != nil {
		t.Fatal(err)
	}
	if p.Leaves[0].RequestTimeoutMS != 250 {
		t.Fatalf("timeout = %d", p.Leaves[0].RequestTimeoutMS)
	}
}

func BenchmarkResolveHeaders(b *testing.B) {
	h := http.Header{}
	h.Set("x-gateway-provider", "openai")
	h.Set("Authorization", "Bearer sk-1")
	in, _ := ingress.Parse(h)
	cache := NewConfigCache(16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve(in, testResolver, cache); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveConfig(b *testing.B) {
	h := http.Header{}
	h.Set("x-gateway-config", `{"strategy":{"mode":"fallback"},"retry":{"attempts":2},"cache":{"mode":"simple"},"targets":[{"provider":"openai","api_key":"a"},{"provider":"groq","api_key":"b"}]}`)
	in, _ := ingress.Parse(h)
	cache := NewConfigCache(16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve(in, testResolver, cache); err != nil {
			b.Fatal(err)
		}
	}
}
