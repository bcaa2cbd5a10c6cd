package llmgateway_test

// The dashboard test lives here, where every package of the gateway is
// linked and so has declared its metrics (internal/metricset).

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	_ "github.com/caddy-llm-gateway/caddy-llm-gateway"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// promQLWords are the PromQL functions, aggregations and keywords a
// query may name besides metrics.
var promQLWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`sum min max avg count stddev stdvar topk bottomk quantile count_values group
		rate irate increase delta idelta deriv predict_linear resets changes histogram_quantile
		abs ceil floor round clamp clamp_min clamp_max exp ln log2 log10 sqrt sgn timestamp time vector scalar
		absent absent_over_time sort sort_desc label_replace label_join
		avg_over_time min_over_time max_over_time sum_over_time count_over_time last_over_time quantile_over_time
		and or unless bool offset by without on ignoring group_left group_right inf nan e`) {
		promQLWords[w] = true
	}
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers   = regexp.MustCompile(`\{[^}]*\}`)
	ranges     = regexp.MustCompile(`\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	variables  = regexp.MustCompile(`\$\{?\w+\}?`)
	labelVals  = regexp.MustCompile(`label_values\(\s*([^,()]+)\s*,\s*\w+\s*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	numberLike = regexp.MustCompile(`^[0-9]`)
)

// queriedMetrics returns the names a PromQL query (or a Grafana
// label_values query) reads as metrics: every identifier that is not a
// label, a label value, a range, a variable or a PromQL word.
func queriedMetrics(q string) []string {
	q = labelVals.ReplaceAllString(q, "$1")
	q = quoted.ReplaceAllString(q, "")
	q = matchers.ReplaceAllString(q, "")
	q = ranges.ReplaceAllString(q, "")
	q = grouping.ReplaceAllString(q, "")
	q = variables.ReplaceAllString(q, "")
	var out []string
	for _, id := range identifier.FindAllString(q, -1) {
		if !promQLWords[id] && !numberLike.MatchString(id) {
			out = append(out, id)
		}
	}
	return out
}

// exported reports whether the gateway exports name: a declared metric,
// or a histogram's _bucket, _sum or _count series.
func exported(names map[string]bool, name string) bool {
	if names[name] {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && names[b] {
			return true
		}
	}
	return false
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	raw, err := os.ReadFile("examples/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestQueriedMetrics(t *testing.T) {
	tests := []struct{ q, want string }{
		{`sum by (reason) (rate(llm_gateway_refusals_total{reason=~"$r", x="a{b}"}[$__rate_interval]))`, "llm_gateway_refusals_total"},
		{`histogram_quantile(0.95, sum by (le) (rate(gen_ai_client_operation_duration_seconds_bucket[5m])))`, "gen_ai_client_operation_duration_seconds_bucket"},
		{`max by (policy_id, group) (llm_gateway_budget_remaining) / on (policy_id, group) max by (policy_id, group) (llm_gateway_budget_limit) * 100`,
			"llm_gateway_budget_remaining llm_gateway_budget_limit"},
		{`label_values(llm_gateway_cost_usd_total, workspace)`, "llm_gateway_cost_usd_total"},
		{`llm_gateway_budget_remaining <= bool 0`, "llm_gateway_budget_remaining"},
		{`llm_gatway_refusals_total`, "llm_gatway_refusals_total"},
	}
	for _, tt := range tests {
		if got := strings.Join(queriedMetrics(tt.q), " "); got != tt.want {
			t.Errorf("queriedMetrics(%s) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

// TestDashboardAndDocsUseRealMetrics keeps examples/grafana-dashboard.json
// and the metrics table of docs/observability.md in step with what the
// gateway exports (every package's declared collectors): every panel
// queries at least one metric and only metrics the gateway exports (a
// misspelt name fails), and the table names every exported metric.
func TestDashboardAndDocsUseRealMetrics(t *testing.T) {
	names := metricset.Names()
	if !names["llm_gateway_requests_total"] || !names["llm_ledger_queue_records"] || !names["llm_gateway_budget_used"] {
		t.Fatalf("the gateway's packages declared too little: %v", names)
	}
	d := readDashboard(t)
	if len(d.Panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue // a heading
		}
		n := 0
		for _, tg := range p.Targets {
			for _, m := range queriedMetrics(tg.Expr) {
				n++
				if !exported(names, m) {
					t.Errorf("panel %q queries %s, which the gateway does not export", p.Title, m)
				}
			}
		}
		if n == 0 {
			t.Errorf("panel %q queries no metric", p.Title)
		}
	}
	for _, v := range d.Templating.List {
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		for _, m := range queriedMetrics(s) {
			if !exported(names, m) {
				t.Errorf("variable %q queries %s, which the gateway does not export", v.Name, m)
			}
		}
	}
	docs, err := os.ReadFile("docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for n := range names {
		if !strings.Contains(string(docs), "`"+n+"`") {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("docs/observability.md does not list %s", n)
	}
}

// TestDashboardWatchesMoneyAndStores: the dashboard has panels for the
// budgets (limit, used, remaining), the refusals, the ledger (queue,
// spool, drops, writer lag) and the stores (up, errors, latency).
func TestDashboardWatchesMoneyAndStores(t *testing.T) {
	used := map[string]bool{}
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			for _, m := range queriedMetrics(tg.Expr) {
				used[m] = true
			}
		}
	}
	for _, m := range []string{
		"llm_gateway_budget_limit", "llm_gateway_budget_used", "llm_gateway_budget_remaining",
		"llm_gateway_refusals_total",
		"llm_ledger_queue_records", "llm_ledger_spool_bytes", "llm_ledger_records_dropped_total", "llm_ledger_writer_lag_seconds",
		"llm_gateway_store_up", "llm_ledger_store_up",
		"llm_gateway_store_errors_total", "llm_gateway_store_command_duration_seconds_bucket",
		"llm_ledger_store_errors_total", "llm_ledger_store_write_duration_seconds_bucket",
	} {
		if !used[m] {
			t.Errorf("no panel queries %s", m)
		}
	}
}
