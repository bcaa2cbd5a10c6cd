package keys

import (
	"fmt"
	"testing"
)

// BenchmarkLookup authenticates one key among 10 and among 1,000,000:
// the cost is one HMAC and one map read either way.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			kv, _ := fileKV(b)
			s := newTestStore(b, kv, nil)
			var probe string
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("%s%043d", KeyPrefix, i)
				r := &APIKey{ID: fmt.Sprintf("%08d", i), Name: "k", Status: StatusActive, Digest: s.Hasher().Sum(k).String()}
				_ = s.idx.putAPIKey(r, r.Name, false)
				if i == n/2 {
					probe = k
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, res := s.Lookup(probe); res != Valid {
					b.Fatal(res)
				}
			}
		})
	}
}
