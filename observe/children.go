package observe

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric children by label values, remembered. A vector's WithLabelValues
// validates and hashes every label value and takes the vector's lock on
// each call, and a request records half a dozen of them; a hit here is one
// lock-free map lookup with no allocation. Label values are bounded
// before they get here (labels.go), and at most maxChildren tuples are
// remembered per vector; past that, calls go to the vector as before.
// Vectors here are never reset and their children never deleted, so a
// remembered child is always the vector's own.

// maxChildren bounds the tuples remembered per vector.
const maxChildren = 4096

// labelKey holds up to four label values, unused ones empty.
type labelKey [4]string

// children remembers a vector's children; get is the vector's
// WithLabelValues.
type children[V any] struct {
	m   atomic.Pointer[map[labelKey]V]
	mu  sync.Mutex
	n   int
	get func(...string) V
}

func newChildren[V any](n int, get func(...string) V) *children[V] {
	return &children[V]{n: n, get: get}
}

// with returns the child for the first c.n values of k.
func (c *children[V]) with(k labelKey) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	lv := make([]string, c.n)
	copy(lv, k[:c.n])
	v := c.get(lv...)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxChildren {
		return v
	}
	var next map[labelKey]V
	if old != nil {
		next = maps.Clone(*old)
	} else {
		next = make(map[labelKey]V, 1)
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

func counters(v *prometheus.CounterVec, n int) *children[prometheus.Counter] {
	return newChildren(n, v.WithLabelValues)
}

func observers(v *prometheus.HistogramVec, n int) *children[prometheus.Observer] {
	return newChildren(n, v.WithLabelValues)
}
