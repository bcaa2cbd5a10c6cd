package integration

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
