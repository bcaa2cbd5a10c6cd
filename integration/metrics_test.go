package integration

import (
	"strings"
	"testing"
)

// TestMetrics checks the gateway's Prometheus series on the admin
// endpoint, and that they hold no secrets.
func TestMetrics(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	resp, _ := do(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	code, body := getAdmin(t, "/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		`llm_gateway_requests_total{code="200",endpoint="chat.completions",provider="openai"}`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",gen_ai_token_type="input"}`,
		`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, secret := range []string{gatewayKey, "sk-test-provider"} {
		if strings.Contains(body, secret) {
			t.Fatalf("secret %q in metrics", secret)
		}
	}
}
