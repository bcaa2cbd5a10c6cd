package observe

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// metricNames returns the fully qualified names of cs.
func metricNames(cs []prometheus.Collector) map[string]bool {
	names := map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
			names[m[1]] = true
		}
	}
	return names
}

var metricRef = regexp.MustCompile(`\b(?:gen_ai|llm_gateway)_[a-z_]+`)

// TestDashboardAndREADMEUseRealMetrics keeps examples/grafana-dashboard.json
// and the metrics table of docs/observability.md in step with the
// collectors: the dashboard queries only metrics the gateway exports, and
// the table names every one of them.
func TestDashboardAndREADMEUseRealMetrics(t *testing.T) {
	names := metricNames(append(append([]prometheus.Collector{}, genaiCollectors...), collectors...))
	// Exported by the ratelimit package, which imports this one.
	names["llm_gateway_ratelimit_rejections_total"] = true
	dash, err := os.ReadFile("../examples/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range metricRef.FindAllString(string(dash), -1) {
		base := ref
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(ref, suf); ok && names[b] {
				base = b
			}
		}
		if !names[base] && !strings.HasSuffix(ref, "_name") && !strings.HasSuffix(ref, "_model") && !strings.HasSuffix(ref, "_type") {
			t.Errorf("dashboard queries %s, which the gateway does not export", ref)
		}
	}
	readme, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range genaiCollectors {
		for n := range metricNames([]prometheus.Collector{c}) {
			if !strings.Contains(string(readme), "`"+n+"`") {
				t.Errorf("docs/observability.md does not list %s", n)
			}
		}
	}
}
