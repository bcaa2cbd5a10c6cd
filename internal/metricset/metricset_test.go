package metricset

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// gaugeCollector reports one gauge of a fixed value, as a per-load
// collector reads its load's state.
type gaugeCollector struct{ v float64 }

var gaugeDesc = prometheus.NewDesc("metricset_test_value", "A test value.", nil, nil)

func (gaugeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- gaugeDesc }
func (g gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(gaugeDesc, prometheus.GaugeValue, g.v)
}

// TestRegisterAgainIsNoError: a registry that already holds the
// collectors (an earlier load's) takes them again without error, and a
// nil registry (typed or not) registers nothing.
func TestRegisterAgainIsNoError(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "metricset_test_total", Help: "A test counter."})
	cs := Declare(c)
	reg := prometheus.NewRegistry()
	for i := 0; i < 2; i++ {
		if err := Register(reg, cs); err != nil {
			t.Fatalf("registration %d: %v", i+1, err)
		}
	}
	var nilReg *prometheus.Registry
	if err := Register(nilReg, cs); err != nil {
		t.Fatal(err)
	}
	if err := Register(nil, cs); err != nil {
		t.Fatal(err)
	}
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "metricset_test_total", Help: "Another help."})
	if err := Register(reg, []prometheus.Collector{clash}); err == nil {
		t.Error("a different collector of the same name was registered")
	}
}

// TestReplaceSwapsTheLoadsCollector: Replace puts a new load's collector
// in place of the earlier one, so the registry reads the new state.
func TestReplaceSwapsTheLoadsCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := Replace(reg, gaugeCollector{1}); err != nil {
		t.Fatal(err)
	}
	if err := Replace(reg, gaugeCollector{2}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetGauge().GetValue() != 2 {
		t.Fatalf("gathered %v, %v; want the second collector's 2", mfs, err)
	}
	if err := Replace((*prometheus.Registry)(nil), gaugeCollector{3}); err != nil {
		t.Fatal(err)
	}
}

// TestNamesListsDeclared: Names holds every declared collector's metric,
// whether or not it has series yet.
func TestNamesListsDeclared(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metricset_test_vec_total", Help: "A test vector."}, []string{"l"})
	Declare(vec, gaugeCollector{})
	if testutil.CollectAndCount(vec) != 0 {
		t.Fatal("the vector has series")
	}
	names := Names()
	for _, n := range []string{"metricset_test_vec_total", "metricset_test_value"} {
		if !names[n] {
			t.Errorf("Names lacks %s: %v", n, names)
		}
	}
	if names["metricset_test_undeclared"] {
		t.Error("Names lists an undeclared metric")
	}
}
