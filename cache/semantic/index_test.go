package semantic

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// clock is an injected clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// at returns a dim-dimensional vector whose cosine similarity with
// axis(dim, i) is cos: cos·e_i + sin·e_(i+1).
func at(dim, i int, cos float64) []float32 {
	v := make([]float32, dim)
	v[i%dim] = float32(cos)
	v[(i+1)%dim] = float32(math.Sqrt(1 - cos*cos))
	return v
}

func axis(dim, i int) []float32 { return at(dim, i, 1) }

func TestLookupThreshold(t *testing.T) {
	c := newClock()
	ix := NewIndex(Config{Now: c.Now})
	exp := c.Now().Add(time.Hour)
	if err := ix.Add("p", axis(8, 0), "k0", exp); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		part      Partition
		vec       []float32
		threshold float32
		hit       bool
	}{
		{"identical", "p", axis(8, 0), 0, true},
		{"scaled vector is the same direction", "p", []float32{5, 0, 0, 0, 0, 0, 0, 0}, 0, true},
		{"paraphrase above default", "p", at(8, 0, 0.97), 0, true},
		{"below default", "p", at(8, 0, 0.93), 0, false},
		{"below default, lower threshold", "p", at(8, 0, 0.93), 0.9, true},
		{"invalid threshold means default", "p", at(8, 0, 0.93), 1.5, false},
		{"orthogonal", "p", axis(8, 3), 0.01, false},
		{"other partition", "q", axis(8, 0), 0, false},
		{"other dimension", "p", axis(16, 0), 0, false},
		{"zero vector", "p", make([]float32, 8), 0, false},
		{"NaN", "p", []float32{float32(math.NaN()), 0, 0, 0, 0, 0, 0, 0}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, sim, ok := ix.Lookup(tt.part, tt.vec, tt.threshold)
			if ok != tt.hit {
				t.Fatalf("hit = %v (sim %v), want %v", ok, sim, tt.hit)
			}
			if ok && k != "k0" {
				t.Fatalf("key = %q", k)
			}
		})
	}
}

func TestLookupBestMatch(t *testing.T) {
	ix := NewIndex(Config{})
	exp := time.Now().Add(time.Hour)
	_ = ix.Add("p", at(8, 0, 0.96), "far", exp)
	_ = ix.Add("p", at(8, 0, 0.99), "near", exp)
	_ = ix.Add("p", axis(8, 4), "other", exp)
	k, sim, ok := ix.Lookup("p", axis(8, 0), 0)
	if !ok || k != "near" || math.Abs(float64(sim)-0.99) > 1e-4 {
		t.Fatalf("Lookup = %q, %v, %v; want near, 0.99", k, sim, ok)
	}
}

func TestExpiryDropsLazily(t *testing.T) {
	c := newClock()
	ix := NewIndex(Config{Now: c.Now})
	_ = ix.Add("p", axis(8, 0), "short", c.Now().Add(time.Minute))
	_ = ix.Add("p", at(8, 0, 0.98), "long", c.Now().Add(time.Hour))
	if k, _, _ := ix.Lookup("p", axis(8, 0), 0); k != "short" {
		t.Fatalf("before expiry got %q, want short", k)
	}
	c.Add(time.Minute)
	if k, _, ok := ix.Lookup("p", axis(8, 0), 0); !ok || k != "long" {
		t.Fatalf("after expiry got %q %v, want long", k, ok)
	}
	if n := ix.Len(); n != 1 {
		t.Fatalf("Len = %d after the expired entry was met, want 1", n)
	}
	c.Add(time.Hour)
	if _, _, ok := ix.Lookup("p", axis(8, 0), 0); ok {
		t.Fatal("hit after every entry expired")
	}
	if n, b := ix.Len(), ix.Bytes(); n != 0 || b != 0 {
		t.Fatalf("Len, Bytes = %d, %d; want 0, 0", n, b)
	}
	// Adding an already expired entry stores nothing.
	_ = ix.Add("p", axis(8, 0), "past", c.Now())
	if ix.Len() != 0 {
		t.Fatal("an expired entry was added")
	}
}

func TestAddSameKeyReplaces(t *testing.T) {
	ix := NewIndex(Config{})
	exp := time.Now().Add(time.Hour)
	_ = ix.Add("p", axis(8, 0), "k", exp)
	_ = ix.Add("p", axis(8, 4), "k", exp)
	if ix.Len() != 1 {
		t.Fatalf("Len = %d, want 1", ix.Len())
	}
	if _, _, ok := ix.Lookup("p", axis(8, 0), 0); ok {
		t.Fatal("old vector still indexed")
	}
	if k, _, ok := ix.Lookup("p", axis(8, 4), 0); !ok || k != "k" {
		t.Fatal("new vector not indexed")
	}
}

func TestPartitionCap(t *testing.T) {
	c := newClock()
	ix := NewIndex(Config{MaxEntries: 3, Now: c.Now})
	long := c.Now().Add(time.Hour)
	_ = ix.Add("p", axis(8, 0), "k0", long)
	_ = ix.Add("p", axis(8, 1), "k1", c.Now().Add(time.Minute))
	_ = ix.Add("p", axis(8, 2), "k2", long)
	_ = ix.Add("q", axis(8, 0), "q0", long) // another partition is not capped by p
	c.Add(2 * time.Minute)
	// p is full: the expired k1 goes first.
	_ = ix.Add("p", axis(8, 3), "k3", c.Now().Add(time.Hour))
	for _, k := range []string{"k0", "k2", "k3"} {
		if !has(ix, "p", k) {
			t.Fatalf("%s evicted; want the expired k1 evicted", k)
		}
	}
	// Full again with nothing expired: the oldest (k0) goes.
	_ = ix.Add("p", axis(8, 4), "k4", c.Now().Add(time.Hour))
	if has(ix, "p", "k0") || !has(ix, "p", "k2") || !has(ix, "p", "k4") {
		t.Fatal("not the oldest entry evicted")
	}
	if !has(ix, "q", "q0") || ix.Len() != 4 {
		t.Fatalf("Len = %d, want 4", ix.Len())
	}
	checkInvariants(t, ix)
}

func TestMemoryBudgetEvictsOldest(t *testing.T) {
	per := EntryBytes(8, 2)
	ix := NewIndex(Config{MaxBytes: 3 * per})
	exp := time.Now().Add(time.Hour)
	for i := range 5 {
		// Spread over partitions: the budget is global.
		if err := ix.Add(Partition(fmt.Sprint("p", i%2)), axis(8, i), fmt.Sprint("k", i), exp); err != nil {
			t.Fatal(err)
		}
	}
	if ix.Len() != 3 || ix.Bytes() > 3*per {
		t.Fatalf("Len, Bytes = %d, %d; want 3, ≤ %d", ix.Len(), ix.Bytes(), 3*per)
	}
	for i := range 5 {
		if got, want := has(ix, Partition(fmt.Sprint("p", i%2)), fmt.Sprint("k", i)), i >= 2; got != want {
			t.Fatalf("k%d indexed = %v, want %v", i, got, want)
		}
	}
	if err := NewIndex(Config{MaxBytes: 10}).Add("p", axis(8, 0), "k", exp); err != ErrTooLarge {
		t.Fatalf("entry over the budget: err = %v", err)
	}
}

func TestDimensionChangeResetsPartition(t *testing.T) {
	ix := NewIndex(Config{})
	exp := time.Now().Add(time.Hour)
	_ = ix.Add("p", axis(8, 0), "a", exp)
	_ = ix.Add("p", axis(16, 0), "b", exp)
	if ix.Len() != 1 || has(ix, "p", "a") || !has(ix, "p", "b") {
		t.Fatal("vectors of the old dimension kept")
	}
	if ix.Bytes() != EntryBytes(16, 1) {
		t.Fatalf("Bytes = %d", ix.Bytes())
	}
}

func TestRemoveAndBadVectors(t *testing.T) {
	ix := NewIndex(Config{})
	exp := time.Now().Add(time.Hour)
	_ = ix.Add("p", axis(8, 0), "a", exp)
	_ = ix.Add("p", axis(8, 2), "b", exp)
	ix.Remove("p", "a")
	ix.Remove("p", "missing")
	ix.Remove("nope", "a")
	if has(ix, "p", "a") || !has(ix, "p", "b") || ix.Len() != 1 {
		t.Fatal("Remove removed the wrong entry")
	}
	for _, v := range [][]float32{nil, make([]float32, 4), make([]float32, MaxDims+1), {float32(math.Inf(1))}} {
		if err := ix.Add("p", v, "x", exp); err != ErrBadVector {
			t.Errorf("Add(%d dims) err = %v, want ErrBadVector", len(v), err)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	ix := NewIndex(Config{MaxEntries: 50, MaxBytes: 40 * EntryBytes(8, 3)})
	exp := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				p := Partition(fmt.Sprint(i % 3))
				_ = ix.Add(p, at(8, i, 0.5), fmt.Sprint(g, i%60), exp)
				ix.Lookup(p, axis(8, i), 0.4)
				if i%7 == 0 {
					ix.Remove(p, fmt.Sprint(g, i%60))
				}
			}
		}()
	}
	wg.Wait()
	if ix.Bytes() > 40*EntryBytes(8, 3) {
		t.Fatalf("over budget: %d", ix.Bytes())
	}
	checkInvariants(t, ix)
}

// checkInvariants verifies the bookkeeping: every entry in its slot, the
// maps, the order list and the byte count agree.
func checkInvariants(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n, bytes := 0, int64(0)
	for id, pt := range ix.parts {
		if len(pt.ents) == 0 || pt.id != id || len(pt.vecs) != len(pt.ents)*pt.dim || len(pt.byKey) != len(pt.ents) {
			t.Fatalf("partition %q inconsistent", id)
		}
		for i, e := range pt.ents {
			if e.slot != i || e.part != pt || pt.byKey[e.key] != e {
				t.Fatalf("entry %q in slot %d inconsistent", e.key, i)
			}
			n++
			bytes += EntryBytes(pt.dim, len(e.key))
		}
	}
	if n != ix.order.Len() || bytes != ix.bytes {
		t.Fatalf("%d entries, %d in order; %d bytes, %d counted", n, ix.order.Len(), bytes, ix.bytes)
	}
}

// has reports whether key is indexed in p.
func has(ix *Index, p Partition, key string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	pt := ix.parts[p]
	return pt != nil && pt.byKey[key] != nil
}
