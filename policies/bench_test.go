package policies

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMemoryAdmit measures one admission: "one key" is the contended
// worst case, "parallel keys" spreads goroutines over shards.
func BenchmarkMemoryAdmit(b *testing.B) {
	ctx := context.Background()
	b.Run("one key", func(b *testing.B) {
		m := NewMemoryLimiter()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := m.Admit(ctx, "key", 1<<40, time.Minute, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel keys", func(b *testing.B) {
		m := NewMemoryLimiter()
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "key-" + strconv.Itoa(i)
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)) * 97
			for pb.Next() {
				if _, err := m.Admit(ctx, keys[i%len(keys)], 1<<40, time.Minute, 1); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}

func BenchmarkRedisAdmit(b *testing.B) {
	c := newRedisClient(b)
	r := NewRedisLimiter(c, WithKeyPrefix(testPrefix(b, c)))
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := r.Admit(ctx, "key", 1<<40, time.Minute, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			key := "key-" + strconv.Itoa(int(next.Add(1)))
			for pb.Next() {
				if _, err := r.Admit(ctx, key, 1<<40, time.Minute, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkMatch is the per-request policy work: one Matches, one
// GroupKey, and a request against ten active policies (seven match and get
// a counter key).
func BenchmarkMatch(b *testing.B) {
	var set []*Policy
	for i := 0; i < 10; i++ {
		set = append(set, &Policy{
			ID:         "0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3" + strconv.Itoa(i),
			Conditions: []Condition{{KeyProvider, "openai"}, {"metadata.team", []string{"*", "search", "ads"}[i%3]}},
			GroupBy:    []GroupBy{{KeyAPIKey}, {"metadata._user"}},
		})
	}
	a := fullAttrs()
	b.Run("Matches", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !set[0].Matches(a) {
				b.Fatal("no match")
			}
		}
	})
	b.Run("GroupKey", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = set[0].GroupKey(a)
		}
	})
	b.Run("10 policies", func(b *testing.B) {
		b.ReportAllocs()
		matched := 0
		for i := 0; i < b.N; i++ {
			for _, p := range set {
				if p.Matches(a) {
					_ = p.GroupKey(a)
					matched++
				}
			}
		}
		if matched == 0 {
			b.Fatal("nothing matched")
		}
	})
}

func BenchmarkActive(b *testing.B) {
	s := NewMemoryStore(StoreConfig{})
	st := NewStorageStore(nil, StoreConfig{CacheTTL: time.Hour})
	st.cache.state.Store(&activeState{set: []*Policy{}, fetched: time.Now()})
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = s.Active(ctx)
		}
	})
	b.Run("storage cached", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = st.Active(ctx)
		}
	})
}
