package policies

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRedisReserveSettle is one leased reservation and its
// settlement on a budget key already holding `held` reservations in
// flight: every call reads the whole hash, so the cost grows with them.
func BenchmarkRedisReserveSettle(b *testing.B) {
	c := newRedisClient(b)
	r := NewRedisLimiter(c, WithKeyPrefix(testPrefix(b, c)))
	ctx := context.Background()
	for _, held := range []int{0, 100, 1000} {
		b.Run("held="+strconv.Itoa(held), func(b *testing.B) {
			key := "budget-" + strconv.Itoa(held)
			for i := range held {
				if _, err := r.Reserve(ctx, key, 1<<40, time.Hour, 5, "h"+strconv.Itoa(i), time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Reserve(ctx, key, 1<<40, time.Hour, 5, "x", time.Hour); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Settle(ctx, key, 1<<40, time.Hour, "x", 5, 3, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
