package observe

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestChildrenRemembered: a remembered child is the vector's own (so its
// counts are the vector's), and costs no allocation.
func TestChildrenRemembered(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_total"}, []string{"a", "b"})
	c := counters(vec, 2)
	if c.with(labelKey{"x", "y"}) != vec.WithLabelValues("x", "y") {
		t.Fatal("not the vector's child")
	}
	if c.with(labelKey{"x", "y"}) != vec.WithLabelValues("x", "y") || c.with(labelKey{"x", "z"}) != vec.WithLabelValues("x", "z") {
		t.Fatal("a remembered child is not the vector's")
	}
	if n := len(*c.m.Load()); n != 2 {
		t.Fatalf("%d tuples remembered, want 2", n)
	}
	if allocs := testing.AllocsPerRun(100, func() { c.with(labelKey{"x", "y"}).Inc() }); allocs != 0 {
		t.Fatalf("a remembered child costs %v allocations", allocs)
	}
}

// TestChildrenBounded: at most maxChildren tuples are remembered; past
// that the vector still answers.
func TestChildrenBounded(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_total"}, []string{"a"})
	c := counters(vec, 1)
	for i := range maxChildren + 10 {
		c.with(labelKey{strconv.Itoa(i)}).Inc()
	}
	if n := len(*c.m.Load()); n != maxChildren {
		t.Fatalf("%d tuples remembered, want the bound %d", n, maxChildren)
	}
	past := strconv.Itoa(maxChildren + 5)
	if c.with(labelKey{past}) != vec.WithLabelValues(past) {
		t.Fatal("past the bound, not the vector's child")
	}
}
