package ingress

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// TestGatewayKeyAsBearer: a gw- key in Authorization is the gateway key
// when no x-gateway-api-key is sent, and is then never a provider token;
// anything else in Authorization stays the provider's.
func TestGatewayKeyAsBearer(t *testing.T) {
	gw := keys.NewKey()
	tests := []struct {
		name             string
		header           http.Header
		wantKey, wantTok string
	}{
		{"gateway key as bearer", http.Header{"Authorization": {"Bearer " + gw}}, gw, ""},
		{"bare gateway key", http.Header{"Authorization": {gw}}, gw, ""},
		{"provider key", http.Header{"Authorization": {"Bearer sk-provider"}}, "", "sk-provider"},
		{"gw- prefix, wrong length", http.Header{"Authorization": {"Bearer gw-short"}}, "", "gw-short"},
		{"header key wins", http.Header{"X-Gateway-Api-Key": {"k"}, "Authorization": {"Bearer " + gw}}, "k", gw},
		{"alias header key wins", http.Header{"X-Portkey-Api-Key": {"k"}, "Authorization": {"Bearer sk-p"}}, "k", "sk-p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Parse(tt.header)
			if err != nil {
				t.Fatal(err)
			}
			if h.APIKey != tt.wantKey || h.Authorization != tt.wantTok {
				t.Fatalf("APIKey %q Authorization %q", h.APIKey, h.Authorization)
			}
			if got := GatewayKey(tt.header); got != tt.wantKey {
				t.Fatalf("GatewayKey = %q", got)
			}
		})
	}
}
