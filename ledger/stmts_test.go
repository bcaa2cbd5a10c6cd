package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestRowChunk(t *testing.T) {
	for _, c := range []struct{ rest, want int }{
		{1, 1}, {2, 2}, {3, 2}, {7, 4}, {8, 8}, {127, 64}, {128, 128}, {129, 128}, {1000, 128},
	} {
		if got := rowChunk(c.rest); got != c.want {
			t.Errorf("rowChunk(%d) = %d, want %d", c.rest, got, c.want)
		}
	}
}

// TestInsertEveryChunkShape: batches of sizes that need every prepared
// shape (and more rollup rows than one chunk) store every record once,
// and the rollup sums agree with the records.
func TestInsertEveryChunkShape(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			var want, wantCost int64
			at := time.Duration(0)
			for _, n := range []int{1, 3, 127, 128, 129, 300} {
				recs := make([]Record, n)
				for i := range recs {
					// 150 distinct models: more rollup keys than one chunk.
					recs[i] = rec(fmt.Sprintf("ws-%d", i%2), at, fmt.Sprintf("m-%d", i%150), 200, int64(i+1))
					at += time.Second
					wantCost += int64(i + 1)
				}
				if err := db.Insert(ctx, recs); err != nil {
					t.Fatalf("inserting %d: %v", n, err)
				}
				want += int64(n)
			}
			var rows, cost int64
			if err := db.db.QueryRow("SELECT COUNT(*), SUM(cost_nano_usd) FROM llm_ledger").Scan(&rows, &cost); err != nil {
				t.Fatal(err)
			}
			if rows != want || cost != wantCost {
				t.Errorf("ledger holds %d records costing %d, want %d costing %d", rows, cost, want, wantCost)
			}
			var rolled, rolledCost int64
			if err := db.db.QueryRow("SELECT SUM(requests), SUM(cost_nano_usd) FROM llm_ledger_rollup").Scan(&rolled, &rolledCost); err != nil {
				t.Fatal(err)
			}
			if rolled != want || rolledCost != wantCost {
				t.Errorf("rollup sums %d requests costing %d, want %d costing %d", rolled, rolledCost, want, wantCost)
			}
		})
	}
}
