package budgets

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// BenchmarkAdmitSettle is one request's budget work on the hot path: the
// admission's reservation and the settlement, on a budget far from spent.
func BenchmarkAdmitSettle(b *testing.B) {
	for _, tc := range []struct {
		name string
		lim  func(b *testing.B) policies.Limiter
	}{
		{"memory", func(*testing.B) policies.Limiter { return policies.NewMemoryLimiter() }},
		{"redis", func(b *testing.B) policies.Limiter {
			c := redistest.Client(b, 0)
			return policies.NewRedisLimiter(c, policies.WithKeyPrefix("llm:bench-budget:"+time.Now().Format(time.RFC3339Nano)+":"))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			u := costLimit(b, 1e6, nil)
			e := NewEnforcer(tc.lim(b), fixedSource{u}, nil, nil)
			ctx := context.Background()
			a, done := attrs("k"), costing(0.01)
			b.ReportAllocs()
			for b.Loop() {
				adm, refusal, err := e.Admit(ctx, a, Reserve{NanoUSD: 20_000_000})
				if err != nil || refusal != nil {
					b.Fatal(err, refusal)
				}
				if err := adm.Settle(ctx, done); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
