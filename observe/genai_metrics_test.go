package observe

import (
	"bufio"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// scrape registers the GenAI collectors into a fresh registry, as each
// Caddy config load does, and returns the exposition text's samples.
func scrape(t *testing.T) map[string]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := RegisterGenAIMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := RegisterGenAIMetrics(reg); err != nil {
		t.Fatalf("second registration into the same registry: %v", err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	samples := map[string]string{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		samples[line[:i]] = line[i+1:]
	}
	return samples
}

func resetGenAIMetrics() {
	for _, c := range genaiCollectors {
		switch v := c.(type) {
		case *prometheus.HistogramVec:
			v.Reset()
		case *prometheus.CounterVec:
			v.Reset()
		case *prometheus.GaugeVec:
			v.Reset()
		}
	}
}

func TestRecordGenAIScrape(t *testing.T) {
	resetGenAIMetrics()
	bounds := &LabelBounds{Model: NewLabelSet(1, "gpt-4o-mini"), Workspace: NewLabelSet(0, "ws-a")}
	RecordGenAI(bounds, &GenAIRecord{Operation: providers.OpChat, Provider: "openai", Model: "gpt-4o-mini", Workspace: "ws-a", Duration: 300 * time.Millisecond,
		Usage: &providers.Usage{PromptTokens: 100, CompletionTokens: 20}, CostUSD: 0.000027, CostKnown: true})
	RecordGenAI(bounds, &GenAIRecord{Operation: providers.OpChat, Provider: "openai", Model: "gpt-4o-mini", Workspace: "ws-b", Duration: 2 * time.Second,
		TimeToFirstChunk: 150 * time.Millisecond, Usage: &providers.Usage{PromptTokens: 100, CompletionTokens: 20}, CostUSD: 0.000027, CostKnown: true})
	// A retried attempt: a duration with error_type, no tokens.
	RecordGenAI(bounds, &GenAIRecord{Operation: providers.OpResponses, Provider: "bedrock", Model: "made-up-1", Duration: 50 * time.Millisecond, ErrorType: "429"})
	// Past the model bound, and no price.
	RecordGenAI(bounds, &GenAIRecord{Operation: providers.OpEmbeddings, Provider: "cloudc", Model: "made-up-2", Duration: time.Second, Usage: &providers.Usage{PromptTokens: 5000}})
	RecordCacheLookup(providers.OpChat, "HIT")
	RecordCacheLookup(providers.OpChat, "MISS")
	RecordCacheLookup(providers.OpChat, "DISABLED")
	RecordRetry("openai")
	RecordFallback("anthropic")
	RecordBreakerTransition("openai", "closed", "open")
	RecordBreakerTransition("openai", "open", "half-open")
	RecordGuardrailVerdict("input", "regexMatch", "fail")

	s := scrape(t)
	want := map[string]string{
		`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini"}`:                  "2",
		`gen_ai_client_operation_duration_seconds_sum{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini"}`:                    "2.3",
		`gen_ai_client_operation_duration_seconds_bucket{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",le="0.32"}`:       "1",
		`gen_ai_client_operation_duration_seconds_count{error_type="429",gen_ai_operation_name="chat",gen_ai_provider_name="aws.bedrock",gen_ai_request_model="made-up-1"}`:            "1",
		`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="embeddings",gen_ai_provider_name="gcp.vertex_ai",gen_ai_request_model="_other"}`:          "1",
		`gen_ai_client_operation_time_to_first_chunk_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini"}`:                     "1",
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",gen_ai_token_type="input"}`:                       "200",
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",gen_ai_token_type="output"}`:                      "40",
		`gen_ai_client_token_usage_bucket{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",gen_ai_token_type="input",le="6.7108864e+07"}`: "2",
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="embeddings",gen_ai_provider_name="gcp.vertex_ai",gen_ai_request_model="_other",gen_ai_token_type="input"}`:               "5000",
		`llm_gateway_cost_usd_total{gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",workspace="ws-a"}`:                                                                "2.7e-05",
		`llm_gateway_cost_usd_total{gen_ai_provider_name="openai",gen_ai_request_model="gpt-4o-mini",workspace="_other"}`:                                                              "2.7e-05",
		`llm_gateway_cost_unknown_total{gen_ai_provider_name="gcp.vertex_ai",gen_ai_request_model="_other"}`:                                                                           "1",
		`llm_gateway_cache_lookups_total{cache_status="hit",gen_ai_operation_name="chat"}`:                                                                                             "1",
		`llm_gateway_cache_lookups_total{cache_status="miss",gen_ai_operation_name="chat"}`:                                                                                            "1",
		`llm_gateway_retries_total{gen_ai_provider_name="openai"}`:                                                                                                                     "1",
		`llm_gateway_fallbacks_total{gen_ai_provider_name="anthropic"}`:                                                                                                                "1",
		`llm_gateway_circuit_breaker_transitions_total{gen_ai_provider_name="openai",state="open"}`:                                                                                    "1",
		`llm_gateway_circuit_breaker_transitions_total{gen_ai_provider_name="openai",state="half_open"}`:                                                                               "1",
		`llm_gateway_circuit_breakers{gen_ai_provider_name="openai",state="open"}`:                                                                                                     "0",
		`llm_gateway_circuit_breakers{gen_ai_provider_name="openai",state="half_open"}`:                                                                                                "1",
		`llm_gateway_guardrail_verdicts_total{check="regexMatch",stage="input",verdict="fail"}`:                                                                                        "1",
	}
	for k, v := range want {
		if got, ok := s[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v); want %q", k, got, ok, v)
		}
	}
	for k := range s {
		if strings.Contains(k, "made-up-2") || strings.Contains(k, "ws-b") || strings.Contains(k, "DISABLED") || strings.Contains(k, `cache_status="disabled"`) {
			t.Errorf("unbounded or ignored label value exported: %s", k)
		}
		if strings.HasPrefix(k, "gen_ai_client_token_usage") && strings.Contains(k, "made-up-1") {
			t.Errorf("tokens recorded for an attempt without usage: %s", k)
		}
	}
}

func TestLabelSet(t *testing.T) {
	s := NewLabelSet(2, "a")
	for _, tt := range []struct{ in, want string }{
		{"a", "a"}, {"b", "b"}, {"c", "c"}, {"d", OtherLabel}, {"b", "b"}, {"", ""},
		{strings.Repeat("x", 300), OtherLabel},
	} {
		if got := s.Bound(tt.in); got != tt.want {
			t.Errorf("Bound(%.10q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	s.Allow("e")
	if got := s.Bound("e"); got != "e" {
		t.Errorf("allowed value bounded to %q", got)
	}
	var none *LabelSet
	if got := none.Bound(strings.Repeat("y", 300)); len(got) != MaxLabelBytes {
		t.Errorf("nil set kept %d bytes", len(got))
	}
}

func BenchmarkRecordGenAI(b *testing.B) {
	bounds := &LabelBounds{Model: NewLabelSet(100, "gpt-4o-mini"), Workspace: NewLabelSet(100, "ws")}
	r := &GenAIRecord{Operation: providers.OpChat, Provider: "openai", Model: "gpt-4o-mini", Workspace: "ws", Duration: 300 * time.Millisecond,
		TimeToFirstChunk: 100 * time.Millisecond, Usage: &providers.Usage{PromptTokens: 100, CompletionTokens: 20}, CostUSD: 0.000027, CostKnown: true}
	b.ReportAllocs()
	for b.Loop() {
		RecordGenAI(bounds, r)
	}
}
