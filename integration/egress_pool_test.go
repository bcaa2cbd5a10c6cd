package integration

import (
	"testing"
)

// TestEgressGuardedNeverReusesTrustedConnection: an operator's virtual key
// may point at an internal address (trusted, not checked), and its proxy
// keeps the connection idle for reuse. A client naming the same address
// as a custom host must still be refused: guarded attempts use transports
// of their own, so they cannot pick up the trusted attempt's pooled
// connection (a pool is keyed by host:port only).
func TestEgressGuardedNeverReusesTrustedConnection(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{
		LLM: `virtual_key internal {
			provider openai
			api_key sk-test-provider
			custom_host ` + up.URL + `/v1
		}`,
		Gateway: "max_request_body 1MB", // no custom_host_allow: public addresses only
	})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-virtual-key", "internal")
	if resp.StatusCode != 200 {
		t.Fatalf("trusted virtual key: status %d: %s", resp.StatusCode, raw)
	}
	seen := up.count()
	resp, raw = do(t, "POST", "/chat/completions", body,
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1", "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 400 || up.count() != seen {
		t.Fatalf("guarded custom host on a trusted host's pooled connection: status %d, upstream saw %d more: %s",
			resp.StatusCode, up.count()-seen, raw)
	}
}
