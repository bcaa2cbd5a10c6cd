package ingress

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		check   func(t *testing.T, h *Headers)
		errIn   string // param of the expected 400
	}{
		{
			name:    "provider and bearer token",
			headers: map[string]string{"x-gateway-api-key": "k", "x-gateway-provider": "OpenAI", "Authorization": "Bearer sk-1"},
			check: func(t *testing.T, h *Headers) {
				if h.APIKey != "k" || h.Provider != "openai" || h.Authorization != "sk-1" || h.Alias {
					t.Fatalf("%+v", h)
				}
			},
		},
		{
			name:    "bare token",
			headers: map[string]string{"x-gateway-api-key": "k", "Authorization": "sk-bare"},
			check: func(t *testing.T, h *Headers) {
				if h.Authorization != "sk-bare" {
					t.Fatalf("token %q", h.Authorization)
				}
			},
		},
		{
			name:    "gateway key in x-api-key (Anthropic clients) is taken and removed",
			headers: map[string]string{"x-api-key": "gw-" + strings.Repeat("a1B", 14) + "z", "x-gateway-provider": "anthropic"},
			check: func(t *testing.T, h *Headers) {
				if h.APIKey != "gw-"+strings.Repeat("a1B", 14)+"z" || h.Authorization != "" {
					t.Fatalf("%+v", h)
				}
			},
		},
		{
			name:    "provider key in x-api-key when Authorization names none",
			headers: map[string]string{"x-gateway-api-key": "k", "x-api-key": "sk-ant-api03-abc"},
			check: func(t *testing.T, h *Headers) {
				if h.APIKey != "k" || h.Authorization != "sk-ant-api03-abc" {
					t.Fatalf("%+v", h)
				}
			},
		},
		{
			name:    "Authorization wins over x-api-key for the provider key",
			headers: map[string]string{"x-gateway-api-key": "k", "x-api-key": "sk-ant-1", "Authorization": "Bearer sk-2"},
			check: func(t *testing.T, h *Headers) {
				if h.Authorization != "sk-2" {
					t.Fatalf("%+v", h)
				}
			},
		},
		{
			name:    "portkey aliases",
			headers: map[string]string{"x-portkey-api-key": "k", "x-portkey-virtual-key": "vk", "x-portkey-trace-id": "t1"},
			check: func(t *testing.T, h *Headers) {
				if h.APIKey != "k" || h.VirtualKey != "vk" || h.TraceID != "t1" || !h.Alias {
					t.Fatalf("%+v", h)
				}
			},
		},
		{
			name:    "gateway prefix wins over alias",
			headers: map[string]string{"x-gateway-provider": "groq", "x-portkey-provider": "openai"},
			check: func(t *testing.T, h *Headers) {
				if h.Provider != "groq" {
					t.Fatalf("provider %q", h.Provider)
				}
			},
		},
		{
			name:    "custom host, config, metadata, timeout, forward headers (comma list)",
			headers: map[string]string{"x-gateway-custom-host": "http://127.0.0.1:11434", "x-gateway-config": "pc-1", "x-gateway-metadata": `{"_user":"u1","n":3}`, "x-gateway-request-timeout": "1500", "x-gateway-forward-headers": "X-A, x-b"},
			check: func(t *testing.T, h *Headers) {
				if h.CustomHost != "http://127.0.0.1:11434" || h.Config != "pc-1" || h.RequestTimeoutMS != 1500 {
					t.Fatalf("%+v", h)
				}
				if !reflect.DeepEqual(h.Metadata, map[string]string{"_user": "u1", "n": "3"}) {
					t.Fatalf("metadata %v", h.Metadata)
				}
				if !reflect.DeepEqual(h.ForwardHeaders, []string{"X-A", "x-b"}) {
					t.Fatalf("forward %v", h.ForwardHeaders)
				}
			},
		},
		{
			name:    "forward headers as JSON array",
			headers: map[string]string{"x-gateway-forward-headers": `["X-A","X-B"]`},
			check: func(t *testing.T, h *Headers) {
				if !reflect.DeepEqual(h.ForwardHeaders, []string{"X-A", "X-B"}) {
					t.Fatalf("forward %v", h.ForwardHeaders)
				}
			},
		},
		{
			name:    "cache headers",
			headers: map[string]string{"x-gateway-cache-force-refresh": "true", "x-gateway-cache-namespace": "ns"},
			check: func(t *testing.T, h *Headers) {
				if !h.ForceRefresh || h.CacheNamespace != "ns" {
					t.Fatalf("%+v", h)
				}
			},
		},
		{
			name:    "force refresh false is not a refresh",
			headers: map[string]string{"x-gateway-cache-force-refresh": "false"},
			check: func(t *testing.T, h *Headers) {
				if h.ForceRefresh {
					t.Fatal("false must not refresh")
				}
			},
		},
		{
			name:    "cloud headers",
			headers: map[string]string{"x-gateway-cloudb-resource-name": "res", "x-gateway-clouda-region": "eu-west-1", "x-gateway-cloudc-project-id": "p"},
			check: func(t *testing.T, h *Headers) {
				want := map[string]string{"resource_name": "res", "clouda_region": "eu-west-1", "cloudc_project_id": "p"}
				if !reflect.DeepEqual(h.Cloud, want) {
					t.Fatalf("cloud %v", h.Cloud)
				}
			},
		},
		{name: "metadata not JSON", headers: map[string]string{"x-gateway-metadata": "user=1"}, errIn: "x-gateway-metadata"},
		{name: "metadata an array", headers: map[string]string{"x-gateway-metadata": `["a"]`}, errIn: "x-gateway-metadata"},
		{name: "timeout not a number", headers: map[string]string{"x-gateway-request-timeout": "soon"}, errIn: "x-gateway-request-timeout"},
		{name: "timeout negative", headers: map[string]string{"x-gateway-request-timeout": "-5"}, errIn: "x-gateway-request-timeout"},
		{name: "force refresh garbage", headers: map[string]string{"x-gateway-cache-force-refresh": "maybe"}, errIn: "x-gateway-cache-force-refresh"},
		{name: "forward headers bad JSON", headers: map[string]string{"x-gateway-forward-headers": `["a"`}, errIn: "x-gateway-forward-headers"},
		{name: "forward headers nested JSON", headers: map[string]string{"x-gateway-forward-headers": `[["a"]]`}, errIn: "x-gateway-forward-headers"},
		{name: "forward headers deep JSON", headers: map[string]string{"x-gateway-forward-headers": strings.Repeat("[", 100000)}, errIn: "x-gateway-forward-headers"},
		{name: "forward headers not tokens", headers: map[string]string{"x-gateway-forward-headers": "X-A, bad name"}, errIn: "x-gateway-forward-headers"},
		{name: "forward headers too many", headers: map[string]string{"x-gateway-forward-headers": strings.Repeat("X-A,", MaxForwardHeaders+1)}, errIn: "x-gateway-forward-headers"},
		{name: "timeout zero", headers: map[string]string{"x-gateway-request-timeout": "0"}, errIn: "x-gateway-request-timeout"},
		{name: "timeout fractional", headers: map[string]string{"x-gateway-request-timeout": "1.5"}, errIn: "x-gateway-request-timeout"},
		{name: "timeout overflows a duration", headers: map[string]string{"x-gateway-request-timeout": "9300000000000"}, errIn: "x-gateway-request-timeout"},
		{name: "timeout beyond int64", headers: map[string]string{"x-gateway-request-timeout": "99999999999999999999"}, errIn: "x-gateway-request-timeout"},
		{name: "timeout one past the maximum", headers: map[string]string{"x-gateway-request-timeout": "86400001"}, errIn: "x-gateway-request-timeout"},
		{name: "timeout alias prefix checked too", headers: map[string]string{"x-portkey-request-timeout": "9300000000000"}, errIn: "x-gateway-request-timeout"},
		{name: "metadata too deep", headers: map[string]string{"x-gateway-metadata": `{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`}, errIn: "x-gateway-metadata"},
		{name: "metadata too large", headers: map[string]string{"x-gateway-metadata": `{"a":"` + strings.Repeat("x", MaxMetadataBytes) + `"}`}, errIn: "x-gateway-metadata"},
		{name: "metadata invalid UTF-8", headers: map[string]string{"x-gateway-metadata": "{\"a\":\"\xff\"}"}, errIn: "x-gateway-metadata"},
		{name: "provider not a slug", headers: map[string]string{"x-gateway-provider": `{"api_key":"sk-leak"}`}, errIn: "x-gateway-provider"},
		{name: "provider too long", headers: map[string]string{"x-gateway-provider": strings.Repeat("a", MaxSlugBytes+1)}, errIn: "x-gateway-provider"},
		{name: "virtual key not a name", headers: map[string]string{"x-gateway-virtual-key": "vk with spaces"}, errIn: "x-gateway-virtual-key"},
		{name: "trace id too long", headers: map[string]string{"x-gateway-trace-id": strings.Repeat("t", MaxTraceIDBytes+1)}, errIn: "x-gateway-trace-id"},
		{
			name:    "timeout at the maximum",
			headers: map[string]string{"x-gateway-request-timeout": "86400000"},
			check: func(t *testing.T, h *Headers) {
				if h.RequestTimeoutMS != MaxRequestTimeoutMS {
					t.Fatalf("timeout %d", h.RequestTimeoutMS)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			got, err := Parse(h)
			if tt.errIn != "" {
				e, ok := err.(*apierror.Error)
				if !ok || e.Status != 400 || e.Param != tt.errIn {
					t.Fatalf("want 400 on %s, got %v", tt.errIn, err)
				}
				// The message never quotes the value.
				for _, v := range tt.headers {
					if len(v) > 3 && strings.Contains(e.Message, v) {
						t.Fatalf("message quotes the header value: %s", e.Message)
					}
				}
				if len(e.Message) > 300 {
					t.Fatalf("message of %d bytes", len(e.Message))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}

func TestIsGatewayHeader(t *testing.T) {
	for name, want := range map[string]bool{"X-Gateway-Api-Key": true, "x-portkey-config": true, "Authorization": false, "X-Gatewayish": false} {
		if IsGatewayHeader(name) != want {
			t.Errorf("%s: want %v", name, want)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	h := http.Header{}
	h.Set("x-gateway-api-key", "gk-123")
	h.Set("x-gateway-provider", "openai")
	h.Set("Authorization", "Bearer sk-123")
	h.Set("x-gateway-trace-id", "trace-1")
	h.Set("x-gateway-metadata", `{"_user":"u1"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(h); err != nil {
			b.Fatal(err)
		}
	}
}

// A gateway key in x-api-key moves to the gateway's own header, so a
// pass-through call never forwards it and a later parse finds it.
func TestXAPIKeyGatewayKey(t *testing.T) {
	key := "gw-" + strings.Repeat("a1B", 14) + "z"
	h := http.Header{"X-Api-Key": {key}}
	if got := GatewayKey(h); got != key {
		t.Fatalf("GatewayKey = %q", got)
	}
	if _, err := Parse(h); err != nil {
		t.Fatal(err)
	}
	if _, ok := h["X-Api-Key"]; ok {
		t.Fatal("the gateway key stayed in x-api-key")
	}
	// The rate limiter parses the request before the gateway does: the
	// second parse finds the same key.
	if got, err := Parse(h); err != nil || got.APIKey != key || GatewayKey(h) != key {
		t.Fatalf("second parse: %+v %v", got, err)
	}
	h = http.Header{"X-Gateway-Api-Key": {"k"}, "X-Api-Key": {"sk-ant-1"}}
	if got := GatewayKey(h); got != "k" {
		t.Fatalf("a provider key taken for the gateway key: %q", got)
	}
	if _, err := Parse(h); err != nil || h.Get("X-Api-Key") != "sk-ant-1" {
		t.Fatalf("a provider key was removed: %v", err)
	}
}
