package batches

import (
	"net/http"
	"testing"
)

// TestSplitHeaderDropsClientKey: a batch created with its gateway key as
// the client's API key (Authorization: Bearer dev-key, no
// x-gateway-api-key) keeps that key neither in storage nor in memory, so
// no line can send it to a provider and the batch can resume; beside an
// x-gateway-api-key, Authorization is still the provider's key.
func TestSplitHeaderDropsClientKey(t *testing.T) {
	for _, tt := range []struct {
		name   string
		h      http.Header
		memory bool
	}{
		{"Caddyfile key as bearer", http.Header{"Authorization": {"Bearer dev-key"}, "X-Gateway-Provider": {"openai"}}, false},
		{"provider key beside the gateway header", http.Header{"X-Gateway-Api-Key": {"dev-key"}, "Authorization": {"Bearer sk-p"}, "X-Gateway-Provider": {"openai"}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			persist, memory := SplitHeader(tt.h)
			if persist.Get("Authorization") != "" || (memory.Get("Authorization") != "") != tt.memory {
				t.Fatalf("persist %v memory %v", persist, memory)
			}
		})
	}
}
