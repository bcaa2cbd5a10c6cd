package integration

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newFakeOpenAITLS is the fake OpenAI provider over HTTPS, with its
// certificate (for 127.0.0.1) written to a PEM file for the trust pool.
func newFakeOpenAITLS(t *testing.T) (*fakeOpenAI, string) {
	f := &fakeOpenAI{}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	pemFile := filepath.Join(t.TempDir(), "provider.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
	if err := os.WriteFile(pemFile, block, 0o600); err != nil {
		t.Fatal(err)
	}
	return f, pemFile
}

// TestTLSProvider: attempts reach an HTTPS provider through the TLS
// transports, trusted (a virtual key's custom_host) and guarded (a
// client's custom host, dialled as a checked IP literal), with the
// certificate verified against the host name the attempt set; without
// the provider's CA in the trust pool the same call is a 502.
func TestTLSProvider(t *testing.T) {
	up, pemFile := newFakeOpenAITLS(t)
	llm := "virtual_key vk-tls {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host " + up.URL + "/v1\n\t\t}"
	trusting := "custom_host_allow loopback\n\t\t\ttransport http {\n\t\t\t\ttls_trust_pool file " + pemFile + "\n\t\t\t}"
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	byHeader := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-test-provider"}
	byKey := []string{"x-gateway-virtual-key", "vk-tls"}
	tests := []struct {
		name    string
		gateway string
		headers []string
		want    int
	}{
		{"trusted target", trusting, byKey, 200},
		{"guarded target", trusting, byHeader, 200},
		{"guarded target, CA not trusted", "custom_host_allow loopback", byHeader, 502},
		{"trusted target, CA not trusted", "custom_host_allow loopback", byKey, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loadSite(t, site{LLM: llm, Gateway: tt.gateway})
			before := up.count()
			resp, raw := do(t, "POST", "/chat/completions", body, tt.headers...)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, raw)
			}
			reached := up.count() > before
			if reached != (tt.want == 200) {
				t.Fatalf("provider reached=%v with status %d", reached, resp.StatusCode)
			}
			if tt.want == 200 && !strings.Contains(string(raw), `"choices"`) {
				t.Fatalf("answer %s", raw)
			}
		})
	}
}

// TestTransportOptionsApply: the llm_gateway block's transport http
// options govern provider connections: with response_header_timeout
// shorter than the provider's delay the attempt fails as unreachable;
// without the delay the same route answers.
func TestTransportOptionsApply(t *testing.T) {
	up := newFakeOpenAI(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Header.Get("X-Test-Delay") == "" {
			return false
		}
		// Hold the headers back: the gateway gives up first. Were the
		// timeout ignored, the answer comes after 5 s and the test
		// fails on its status rather than hanging.
		select {
		case <-release:
		case <-r.Context().Done():
			return true
		case <-time.After(5 * time.Second):
		}
		return false
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	headers := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-test-provider"}
	loadSite(t, site{Gateway: "custom_host_allow loopback\n\t\t\ttransport http {\n\t\t\t\tresponse_header_timeout 100ms\n\t\t\t}"})
	delayed := append([]string{"X-Test-Delay", "1", "x-gateway-forward-headers", "X-Test-Delay"}, headers...)
	resp, raw := do(t, "POST", "/chat/completions", body, delayed...)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(raw), "upstream_unreachable") {
		t.Fatalf("status %d: %s; want the header timeout to end the attempt", resp.StatusCode, raw)
	}
	if resp, raw := do(t, "POST", "/chat/completions", body, headers...); resp.StatusCode != 200 {
		t.Fatalf("status %d without delay: %s", resp.StatusCode, raw)
	}
}
