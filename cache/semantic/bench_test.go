package semantic

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
)

// Run with: go test ./cache/semantic -run '^$' -bench . -benchtime 2s

func randomVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	n, _ := normalized(v)
	return n
}

// near returns a unit vector with cosine about 0.98 to v.
func near(r *rand.Rand, v []float32) []float32 {
	noise := randomVec(r, len(v))
	out := make([]float32, len(v))
	for i := range v {
		out[i] = v[i] + 0.2*noise[i]
	}
	n, _ := normalized(out)
	return n
}

func filledIndex(b *testing.B, r *rand.Rand, n, dim int) (*Index, [][]float32) {
	b.Helper()
	ix := NewIndex(Config{MaxEntries: n, MaxBytes: int64(n) * EntryBytes(dim, 64)})
	exp := time.Now().Add(time.Hour)
	vecs := make([][]float32, 0, 16)
	for i := range n {
		v := randomVec(r, dim)
		if i < 16 {
			vecs = append(vecs, v)
		}
		if err := ix.Add("p", v, fmt.Sprintf("%064d", i), exp); err != nil {
			b.Fatal(err)
		}
	}
	return ix, vecs
}

// BenchmarkSemanticLookup is the lookup cost of a semantic hit and miss
// (an exact scan of the partition, so both cost the same).
func BenchmarkSemanticLookup(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, dim := range []int{256, 1536} {
			r := rand.New(rand.NewPCG(1, uint64(n*dim)))
			var ix *Index
			var stored [][]float32
			for _, kind := range []string{"hit", "miss"} {
				b.Run(fmt.Sprintf("n=%d/dim=%d/%s", n, dim, kind), func(b *testing.B) {
					if ix == nil {
						ix, stored = filledIndex(b, r, n, dim)
					}
					q := randomVec(r, dim)
					if kind == "hit" {
						q = near(r, stored[3])
					}
					b.ResetTimer()
					for b.Loop() {
						_, _, ok := ix.Lookup("p", q, 0.95)
						if ok != (kind == "hit") {
							b.Fatalf("hit = %v", ok)
						}
					}
				})
			}
			ix, stored = nil, nil
			runtime.GC()
		}
	}
}

// BenchmarkExactLookup is the exact cache's cost (key + Get) with n
// stored answers of 1 KB, for comparison.
func BenchmarkExactLookup(b *testing.B) {
	body := []byte(chat("What is the capital of France? Please answer in one word."))
	answer := make([]byte, 1024)
	for _, n := range []int{1000, 100000} {
		s, err := cache.New(int64(n)*2048, time.Now)
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			s.Set(fmt.Sprintf("%032d", i), 200, answer, time.Hour)
		}
		k, _ := cache.Key(cache.KeyParts{Op: "chat", Body: body})
		s.Set(k, 200, answer, time.Hour)
		for _, kind := range []string{"hit", "miss"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, kind), func(b *testing.B) {
				op := "chat"
				if kind == "miss" {
					op = "other"
				}
				for b.Loop() {
					k, _ := cache.Key(cache.KeyParts{Op: op, Body: body})
					if _, ok := s.Get(k); ok != (kind == "hit") {
						b.Fatalf("hit = %v", ok)
					}
				}
			})
		}
		s.Close()
	}
}

// BenchmarkPrepare is the cost of computing the partition and the
// embedded text of a small chat request.
func BenchmarkPrepare(b *testing.B) {
	body := []byte(chat("What is the capital of France? Please answer in one word."))
	p := PartitionParts{Op: "chat", Workspace: "w", Target: "t", Model: "m", Embedder: "e"}
	for b.Loop() {
		if _, _, err := Prepare(p, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryPerEntry reports the heap bytes one indexed entry uses
// (64-byte key, as a hex exact-cache key) next to what it counts against
// the budget.
func BenchmarkMemoryPerEntry(b *testing.B) {
	for _, dim := range []int{256, 1536} {
		b.Run(fmt.Sprintf("dim=%d", dim), func(b *testing.B) {
			const n = 20000
			r := rand.New(rand.NewPCG(2, 3))
			vecs := make([][]float32, n)
			for i := range vecs {
				vecs[i] = randomVec(r, dim)
			}
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("%064d", i)
			}
			exp := time.Now().Add(time.Hour)
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix := NewIndex(Config{MaxEntries: n, MaxBytes: 1 << 40})
				for i := range n {
					_ = ix.Add("p", vecs[i], keys[i], exp)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/entry")
				b.ReportMetric(float64(EntryBytes(dim, 64)), "budgetB/entry")
				runtime.KeepAlive(ix)
			}
		})
	}
}
