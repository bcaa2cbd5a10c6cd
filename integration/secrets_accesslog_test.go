package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// credentialHeaders are every credential header the gateway reads or a
// client may send a provider, under both prefixes, each with a distinct
// secret value.
var credentialHeaders = [][2]string{
	{"Authorization", "Bearer sk-secret-authorization"},
	{"x-gateway-api-key", gatewayKey},
	{"x-portkey-api-key", "secret-portkey-api-key"},
	{"x-api-key", "secret-x-api-key"},
	{"api-key", "secret-azure-api-key"},
	{"x-goog-api-key", "secret-goog-api-key"},
	{"x-amz-security-token", "secret-amz-security-token"},
	{"x-gateway-config", `{"provider":"openai","api_key":"secret-gateway-config-key"}`},
	{"x-portkey-config", `{"provider":"openai","api_key":"secret-portkey-config-key"}`},
	{"x-gateway-clouda-access-key-id", "AKIASECRETGATEWAY"},
	{"x-portkey-clouda-access-key-id", "AKIASECRETPORTKEY"},
	{"x-gateway-clouda-secret-access-key", "secret-gateway-clouda-secret"},
	{"x-portkey-clouda-secret-access-key", "secret-portkey-clouda-secret"},
	{"x-gateway-clouda-session-token", "secret-gateway-clouda-session"},
	{"x-portkey-clouda-session-token", "secret-portkey-clouda-session"},
	{"x-gateway-custom-host", "http://user:secret-userinfo@127.0.0.1:9/v1"},
	{"Cookie", "session=secret-cookie"},
}

// TestAccessLogHidesCredentials runs a site with an access log masked by
// llm_secrets, as the field filter (in both `format filter` spellings) and
// as the log encoder (with and without wrap), and sends a request carrying
// every credential header: none of the secret values may reach the access
// log.
func TestAccessLogHidesCredentials(t *testing.T) {
	for _, tc := range []struct{ name, format string }{
		{"filter fields block", "format filter {\n\t\t\twrap json\n\t\t\tfields {\n\t\t\t\trequest>headers llm_secrets\n\t\t\t}\n\t\t}"},
		{"filter flat", "format filter {\n\t\t\twrap json\n\t\t\trequest>headers llm_secrets\n\t\t}"},
		{"encoder wrap json", "format llm_secrets {\n\t\t\twrap json\n\t\t}"},
		{"encoder", "format llm_secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accessLog := filepath.Join(t.TempDir(), "access.log")
			loadSite(t, site{Before: "log {\n\t\toutput file " + accessLog + "\n\t\t" + tc.format + "\n\t}"})

			trace := "access-log-trace-" + strings.ReplaceAll(tc.name, " ", "-")
			req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[]}`))
			for _, h := range credentialHeaders {
				req.Header.Set(h[0], h[1])
			}
			req.Header.Set("x-gateway-trace-id", trace)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()

			line := waitForLine(t, accessLog, trace)
			for _, h := range credentialHeaders {
				secret := h[1]
				if i := strings.LastIndex(secret, " "); i >= 0 {
					secret = secret[i+1:]
				}
				for _, s := range []string{secret, "secret-"} {
					if strings.Contains(line, s) {
						t.Errorf("access log holds %s (%q): %s", h[0], s, line)
					}
				}
			}
			// The filter masks, it does not drop: the headers are still
			// listed, and harmless ones keep their values.
			for _, want := range []string{`"X-Gateway-Clouda-Secret-Access-Key":["REDACTED"]`, `"X-Portkey-Clouda-Session-Token":["REDACTED"]`, `"X-Gateway-Trace-Id":["` + trace + `"]`} {
				if !strings.Contains(line, want) {
					t.Errorf("access log lacks %s: %s", want, line)
				}
			}
		})
	}
}

// waitForLine returns the line of path holding marker, polling until the
// access log (written after the response) has it.
func waitForLine(t *testing.T, path, marker string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, marker) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log line with %s in %s", marker, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
