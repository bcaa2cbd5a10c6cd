package ingress

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// TestGatewayKeyAsBearer: without x-gateway-api-key, the key a client
// sends as its own API key (Authorization: Bearer, or x-api-key) is the
// gateway key, whatever its form (a Caddyfile key such as dev-key or a
// gw- key the API issued), and is then never a provider token; a gw- key
// wins wherever it is. Beside x-gateway-api-key, Authorization (else
// x-api-key) is the provider's key, as before. The rate limiter's
// GatewayKey and a second Parse of the same headers agree.
func TestGatewayKeyAsBearer(t *testing.T) {
	gw := keys.NewKey()
	tests := []struct {
		name             string
		header           http.Header
		wantKey, wantTok string
		wantFrom         string
		// wantXAPIKey is what stays in x-api-key, which a pass-through
		// call forwards.
		wantXAPIKey string
	}{
		{"gateway key as bearer", http.Header{"Authorization": {"Bearer " + gw}}, gw, "", KeyFromAuthorization, ""},
		{"bare gateway key", http.Header{"Authorization": {gw}}, gw, "", KeyFromAuthorization, ""},
		{"Caddyfile key as bearer", http.Header{"Authorization": {"Bearer dev-key"}}, "dev-key", "", KeyFromAuthorization, ""},
		{"Caddyfile key in x-api-key", http.Header{"X-Api-Key": {"dev-key"}}, "dev-key", "", KeyFromXAPIKey, ""},
		{"gw- key in x-api-key", http.Header{"X-Api-Key": {gw}}, gw, "", KeyFromXAPIKey, ""},
		{"bearer first, x-api-key the provider's", http.Header{"Authorization": {"Bearer dev-key"}, "X-Api-Key": {"sk-ant-1"}}, "dev-key", "sk-ant-1", KeyFromAuthorization, "sk-ant-1"},
		{"gw- key in x-api-key wins over a bearer", http.Header{"Authorization": {"Bearer sk-p"}, "X-Api-Key": {gw}}, gw, "sk-p", KeyFromXAPIKey, ""},
		{"gw- key as bearer wins over x-api-key", http.Header{"Authorization": {"Bearer " + gw}, "X-Api-Key": {"dev-key"}}, gw, "dev-key", KeyFromAuthorization, "dev-key"},
		{"any other token without a gateway header is the gateway key", http.Header{"Authorization": {"Bearer sk-provider"}}, "sk-provider", "", KeyFromAuthorization, ""},
		{"header key wins, bearer is the provider's", http.Header{"X-Gateway-Api-Key": {"k"}, "Authorization": {"Bearer sk-p"}}, "k", "sk-p", KeyFromHeader, ""},
		{"header key wins over a gw- bearer", http.Header{"X-Gateway-Api-Key": {"k"}, "Authorization": {"Bearer " + gw}}, "k", gw, KeyFromHeader, ""},
		{"header key, provider key in x-api-key", http.Header{"X-Gateway-Api-Key": {"k"}, "X-Api-Key": {"sk-ant-1"}}, "k", "sk-ant-1", KeyFromHeader, "sk-ant-1"},
		{"header key, a gw- x-api-key is no provider key", http.Header{"X-Gateway-Api-Key": {"k"}, "X-Api-Key": {gw}}, "k", "", KeyFromHeader, ""},
		{"alias header key wins", http.Header{"X-Portkey-Api-Key": {"k"}, "Authorization": {"Bearer sk-p"}}, "k", "sk-p", KeyFromHeader, ""},
		{"nothing", http.Header{}, "", "", KeyFromHeader, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GatewayKey(tt.header); got != tt.wantKey {
				t.Fatalf("GatewayKey before Parse = %q", got)
			}
			for pass := 1; pass <= 2; pass++ {
				h, err := Parse(tt.header)
				if err != nil {
					t.Fatal(err)
				}
				if h.APIKey != tt.wantKey || h.Authorization != tt.wantTok {
					t.Fatalf("parse %d: APIKey %q Authorization %q", pass, h.APIKey, h.Authorization)
				}
				if pass == 1 && h.KeyFrom != tt.wantFrom {
					t.Fatalf("KeyFrom %q, want %q", h.KeyFrom, tt.wantFrom)
				}
				if got := tt.header.Get("X-Api-Key"); got != tt.wantXAPIKey {
					t.Fatalf("x-api-key left %q, want %q", got, tt.wantXAPIKey)
				}
				if got := GatewayKey(tt.header); got != tt.wantKey {
					t.Fatalf("GatewayKey after parse %d = %q", pass, got)
				}
			}
		})
	}
}

// TestAsProviderKey: for a caller known without a key (a batch line),
// the token Parse took as the gateway key is the provider's again, as
// beside an x-gateway-api-key.
func TestAsProviderKey(t *testing.T) {
	for _, tt := range []struct {
		name    string
		header  http.Header
		wantTok string
		wantX   string
	}{
		{"bearer", http.Header{"Authorization": {"Bearer sk-p"}}, "sk-p", ""},
		{"x-api-key", http.Header{"X-Api-Key": {"sk-ant-1"}}, "sk-ant-1", "sk-ant-1"},
		{"bearer and x-api-key", http.Header{"Authorization": {"Bearer sk-p"}, "X-Api-Key": {"sk-ant-1"}}, "sk-p", "sk-ant-1"},
		{"none", http.Header{}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Parse(tt.header)
			if err != nil {
				t.Fatal(err)
			}
			h.AsProviderKey(tt.header)
			if h.APIKey != "" || h.KeyFrom != KeyFromHeader || h.Authorization != tt.wantTok {
				t.Fatalf("%+v", h)
			}
			if tt.header.Get("X-Api-Key") != tt.wantX || tt.header.Get("X-Gateway-Api-Key") != "" {
				t.Fatalf("header %v", tt.header)
			}
		})
	}
}
