package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestHardeningNoCredentialInDebugLog sends a request through every
// provider kind, each with its own credential value, with the log at
// DEBUG (where reverse_proxy prints upstream request headers), then
// checks every captured log line and every response for every secret.
// The provider must still receive its credential. It runs with the
// default log in plain json (the gateway keeps credentials off the
// request the proxy logs) and through the llm_secrets encoder, as
// examples/Caddyfile configures it; there the provider's response
// headers on the DEBUG line, which the gateway does not touch, must be
// masked too.
func TestHardeningNoCredentialInDebugLog(t *testing.T) {
	for _, tc := range []struct{ name, format string }{
		{"json", ""},
		{"llm_secrets encoder", "format llm_secrets {\n\t\t\twrap json\n\t\t}"},
	} {
		t.Run(tc.name, func(t *testing.T) { noCredentialInDebugLog(t, tc.format) })
	}
}

// upstreamToken is a credential-named header the fake provider answers
// with; only the llm_secrets encoder hides it in the DEBUG line.
var upstreamToken = [2]string{"X-Upstream-Session-Token", "upstream-session-5e55"}

// noCredentialInDebugLog runs the check with the default log in format
// (the harness's plain json when empty).
func noCredentialInDebugLog(t *testing.T, format string) {
	const (
		openaiKey    = "sk-openai-SECRET-9f1c"
		anthropicKey = "sk-ant-SECRET-2b7d"
		azureKey     = "azure-SECRET-44e0"
		geminiKey    = "gemini-SECRET-a5a5"
		cohereKey    = "cohere-SECRET-7c7c"
		awsAKID      = "AKIASECRET0000000001"
		awsSecret    = "aws-secret-SECRET-b00b"
		awsSession   = "aws-session-SECRET-d00d"
	)
	up := newFakeServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(upstreamToken[0], upstreamToken[1])
		w.WriteHeader(http.StatusTeapot) // an error, so no translator has to make sense of it
		fmt.Fprint(w, `{"error":{"message":"nope"}}`)
	})
	loadFreshDefaultLog(t, format, site{LLM: fmt.Sprintf(`virtual_key azure-secret {
			provider azure-openai
			api_key %s
			resource_name contoso
			custom_host %s
			deployment dep-mini gpt-4o-mini 2024-08-01-preview
		}
		virtual_key bedrock-secret {
			provider bedrock
			clouda_access_key_id %s
			clouda_secret_access_key %s
			clouda_session_token %s
			clouda_region us-west-2
			custom_host %s
		}`, azureKey, up.URL, awsAKID, awsSecret, awsSession, up.URL)})

	chatReq := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	cases := []struct {
		name           string
		headers        []string
		wireHeader     string
		wireContains   string
		bodyModelAlter string
	}{
		{"openai", []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer " + openaiKey}, "Authorization", openaiKey, ""},
		{"anthropic", []string{"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL, "Authorization", "Bearer " + anthropicKey}, "X-Api-Key", anthropicKey, ""},
		{"azure", []string{"x-gateway-virtual-key", "azure-secret"}, "Api-Key", azureKey, ""},
		{"gemini", []string{"x-gateway-provider", "google", "x-gateway-custom-host", up.URL, "Authorization", "Bearer " + geminiKey}, "X-Goog-Api-Key", geminiKey, ""},
		{"cohere", []string{"x-gateway-provider", "cohere", "x-gateway-custom-host", up.URL, "Authorization", "Bearer " + cohereKey}, "Authorization", cohereKey, ""},
		{"bedrock", []string{"x-gateway-virtual-key", "bedrock-secret"}, "X-Amz-Security-Token", awsSession, ""},
	}
	var responses strings.Builder
	for _, c := range cases {
		resp, raw := do(t, "POST", "/chat/completions", chatReq, c.headers...)
		responses.Write(raw)
		for k, v := range resp.Header {
			responses.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		seen := up.last()
		if got := seen.Header.Get(c.wireHeader); !strings.Contains(got, c.wireContains) {
			t.Errorf("%s: the provider did not receive its credential in %s (status %d: %s)", c.name, c.wireHeader, resp.StatusCode, raw)
		}
	}
	if a := up.last().Header.Get("Authorization"); !strings.Contains(a, awsAKID) {
		t.Errorf("bedrock request not signed with the access key id: %q", a)
	}
	logs := readLog(t)
	if !strings.Contains(logs, `"msg":"upstream roundtrip"`) {
		t.Fatal("the DEBUG upstream roundtrip line was not logged; the test would prove nothing")
	}
	for _, s := range []string{openaiKey, anthropicKey, azureKey, geminiKey, cohereKey, awsAKID, awsSecret, awsSession, gatewayKey} {
		if strings.Contains(logs, s) {
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, s) {
					t.Errorf("secret %q in the log: %.400s", s, l)
					break
				}
			}
		}
		if strings.Contains(responses.String(), s) {
			t.Errorf("secret %q in a response", s)
		}
	}
	if format != "" {
		if strings.Contains(logs, upstreamToken[1]) || !strings.Contains(logs, `"`+upstreamToken[0]+`":["REDACTED"]`) {
			t.Errorf("the provider's %s is not masked in the DEBUG log", upstreamToken[0])
		}
	}
}

// loadFreshDefaultLog loads s as loadFresh does, with the harness's
// default log (json, DEBUG) written in format instead when format is set.
func loadFreshDefaultLog(t *testing.T, format string, s site) {
	t.Helper()
	if format == "" {
		loadFresh(t, s)
		return
	}
	newHTTPPort()
	const plain = "\t\tformat json\n\t\tlevel DEBUG\n"
	cf := s.caddyfile()
	if !strings.Contains(cf, plain) {
		t.Fatalf("the harness's default log is no longer %q:\n%s", plain, cf)
	}
	cf = strings.Replace(cf, plain, "\t\t"+format+"\n\t\tlevel DEBUG\n", 1)
	loadCaddyfile(t, cf)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
}
