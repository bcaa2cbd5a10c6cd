package integration

import (
	"strings"
	"testing"
)

// TestNumericAndBoundedHeaders: header values out of range are a 400
// naming the header, never an instant 408 or an echo of the value.
func TestNumericAndBoundedHeaders(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	big := `{"api_key":"sk-header-secret","x":"` + strings.Repeat("y", 4000) + `"}`
	tests := []struct {
		name, header, value string
	}{
		{"timeout overflowing a duration", "x-gateway-request-timeout", "9300000000000"},
		{"timeout past int64", "x-gateway-request-timeout", "99999999999999999999"},
		{"timeout past 24 hours", "x-portkey-request-timeout", "86400001"},
		{"timeout fractional", "x-gateway-request-timeout", "2.5"},
		{"timeout negative", "x-gateway-request-timeout", "-1"},
		{"metadata too deep", "x-gateway-metadata", `{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`},
		{"metadata too large", "x-gateway-metadata", `{"a":"` + strings.Repeat("m", 20000) + `"}`},
		{"provider holding a secret", "x-gateway-provider", big},
		{"virtual key holding a secret", "x-gateway-virtual-key", big},
		{"forward headers not names", "x-gateway-forward-headers", big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
				"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider", tt.header, tt.value)
			assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 400, "invalid_request_error")
			if strings.Contains(string(raw), "sk-header-secret") || len(raw) > 600 {
				t.Fatalf("error echoes the header (%d bytes): %.300s", len(raw), raw)
			}
		})
	}
	if up.count() != 0 {
		t.Fatalf("%d rejected requests reached the provider", up.count())
	}
	// The maximum itself is accepted.
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider", "x-gateway-request-timeout", "86400000")
	if resp.StatusCode != 200 {
		t.Fatalf("24 h timeout: %d %s", resp.StatusCode, raw)
	}
}

// TestClientAddressNotForwarded: reverse_proxy's X-Forwarded-* headers
// never reach a provider, which need not learn the client's address, while
// the provider's credential still does.
func TestClientAddressNotForwarded(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider",
		"X-Forwarded-For", "203.0.113.9")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	got := up.last().Header
	for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := got.Get(k); v != "" {
			t.Errorf("%s: %q reached the provider", k, v)
		}
	}
	if got.Get("Authorization") != "Bearer sk-test-provider" {
		t.Errorf("credential lost: %q", got.Get("Authorization"))
	}
}
