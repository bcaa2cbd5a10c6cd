package integration

import (
	"bufio"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"io"
	"net/http"
)

// scrapeMetrics returns every sample of the metrics endpoint by its
// series (name{labels}).
func scrapeMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	code, body := getAdmin(t, "/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

// TestObserveMetricsScrape sends known traffic (a priced chat, an
// unpriced one, a retried request and a fallback) and checks the change
// in the GenAI and gateway series: names, label values (the conventions'
// operation and provider names, a configured workspace) and values.
func TestObserveMetricsScrape(t *testing.T) {
	up := newFakeOpenAI(t)
	var fails atomic.Int32
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.Contains(string(body), `"metrics-retry"`) && fails.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"message":"boom"}}`)
			return true
		}
		return usageHook(w, r, body)
	}
	dead := newFakeOpenAI(t)
	dead.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.WriteHeader(503)
		return true
	}
	// The models the test sends are named in a saved config, so they are
	// configured label values: the bounded model label set may already be
	// full of names earlier tests of this process sent.
	models := `{"strategy":{"mode":"fallback"},"targets":[`
	for i, m := range []string{"o4-mini", "metrics-unpriced", "metrics-retry", "metrics-fallback"} {
		if i > 0 {
			models += ","
		}
		models += `{"provider":"openai","api_key":"k","override_params":{"model":"` + m + `"}}`
	}
	models += `]}`
	loadSite(t, site{LLM: "config metrics-models `" + models + "`"})
	before := scrapeMetrics(t)
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	send := func(body string, h ...string) {
		t.Helper()
		if resp, raw := do(t, "POST", "/chat/completions", []byte(body), h...); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, raw)
		}
	}
	send(`{"model":"o4-mini","messages":[]}`, hdr...)
	send(`{"model":"o4-mini","messages":[]}`, hdr...)
	send(`{"model":"metrics-unpriced","messages":[]}`, hdr...)
	send(`{"model":"metrics-retry","messages":[]}`, "x-gateway-config", `{"retry":{"attempts":1,"on_status_codes":[500]},"provider":"openai","api_key":"sk-test-provider","custom_host":"`+up.URL+`"}`)
	send(`{"model":"metrics-fallback","messages":[]}`, "x-gateway-config", `{"strategy":{"mode":"fallback"},"targets":[`+target(dead, "")+`,`+target(up, "")+`]}`)
	after := scrapeMetrics(t)

	testWS := "" // the harness key's derived workspace, read from the series
	for k := range after {
		// Earlier tests of this process may have left o4-mini series of
		// other workspaces: take the one this test's traffic grew.
		if strings.HasPrefix(k, `llm_gateway_cost_usd_total{gen_ai_provider_name="openai",gen_ai_request_model="o4-mini",workspace="`) && after[k] > before[k] {
			testWS = k
		}
	}
	if testWS == "" {
		t.Fatal("no cost series for o4-mini")
	}
	tests := []struct {
		series string
		delta  float64
	}{
		{`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="o4-mini"}`, 2},
		{`gen_ai_client_operation_duration_seconds_count{error_type="500",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="metrics-retry"}`, 1},
		{`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="metrics-retry"}`, 1},
		{`gen_ai_client_operation_duration_seconds_count{error_type="503",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="metrics-fallback"}`, 1},
		{`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="o4-mini",gen_ai_token_type="input"}`, 2000},
		{`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="o4-mini",gen_ai_token_type="output"}`, 1000},
		{`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="o4-mini",gen_ai_token_type="input"}`, 2},
		{testWS, 2 * 0.00264},
		{`llm_gateway_cost_unknown_total{gen_ai_provider_name="openai",gen_ai_request_model="metrics-unpriced"}`, 1},
		{`llm_gateway_retries_total{gen_ai_provider_name="openai"}`, 1},
		{`llm_gateway_fallbacks_total{gen_ai_provider_name="openai"}`, 1},
		{`llm_gateway_requests_total{code="200",endpoint="chat.completions",provider="openai"}`, 5},
	}
	for _, tt := range tests {
		got := after[tt.series] - before[tt.series]
		if d := got - tt.delta; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s grew by %v, want %v", tt.series, got, tt.delta)
		}
	}
	// The configured workspace is a label value; series never name keys.
	if !strings.Contains(testWS, `workspace="`) || strings.Contains(testWS, `workspace=""`) {
		t.Errorf("cost series without a workspace: %s", testWS)
	}
	for k := range after {
		if strings.Contains(k, gatewayKey) || strings.Contains(k, "sk-test-provider") {
			t.Fatalf("secret in series %s", k)
		}
		if strings.HasPrefix(k, "gen_ai_client_operation_duration_seconds") && strings.Contains(k, "chat.completions") {
			t.Errorf("operation name not the conventions' value: %s", k)
		}
	}
}
