package ratelimit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRegisterMetrics checks that the rejection counter registers into a
// new registry at every config load and again into the same one, as Caddy
// does across reloads, without an error.
func TestRegisterMetrics(t *testing.T) {
	for i, reg := range []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry(), nil} {
		for range 2 {
			if err := registerMetrics(reg); err != nil {
				t.Fatalf("registry %d: %v", i, err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	if err := registerMetrics(reg); err != nil {
		t.Fatal(err)
	}
	rejectionsTotal.WithLabelValues("requests", "rpm").Add(0)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "llm_gateway_ratelimit_rejections_total" {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		if n := l.GetName(); n != "type" && n != "unit" {
			t.Fatalf("unbounded label %q", n)
		}
	}
}
