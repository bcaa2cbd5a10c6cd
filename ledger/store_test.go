package ledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestStoreRoundTripAndScope(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			a := rec("ws-a", 0, "gpt-4o", 200, 1_234_567)
			a.Metadata = map[string]string{"team": "blue", "env": "prod"}
			a.Stream, a.TTFT, a.Retries, a.CacheState, a.VirtualKey = true, 30*time.Millisecond, 2, "MISS", "vk"
			a.CachedTokens, a.CacheWriteTokens, a.ReasoningTokens = 3, 4, 5
			unknown := rec("ws-a", time.Minute, "mystery", 200, 0)
			unknown.CostKnown, unknown.Status, unknown.ErrorType = false, 429, "rate_limited"
			other := rec("ws-b", 0, "gpt-4o", 200, 999)
			if err := db.Insert(ctx, []Record{a, unknown, other}); err != nil {
				t.Fatal(err)
			}
			got, total, _, err := db.Logs(ctx, &Filter{Workspace: "ws-a"}, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			if total != 2 || len(got) != 2 {
				t.Fatalf("ws-a sees %d records (total %d), want its 2", len(got), total)
			}
			if got[0].Model != "mystery" || got[0].CostKnown || got[0].ErrorType != "rate_limited" {
				t.Errorf("newest first with unknown cost and its error type: got %+v", got[0])
			}
			if got[1].ErrorType != "" {
				t.Errorf("a record without an error class reads back with %q", got[1].ErrorType)
			}
			g := got[1]
			g.ID = 0
			want := a
			want.Time = a.Time.UTC()
			if g.Time != want.Time || g.CostNanoUSD != want.CostNanoUSD || !g.CostKnown || g.Metadata["team"] != "blue" ||
				g.TTFT != want.TTFT || !g.Stream || g.Retries != 2 || g.ReasoningTokens != 5 || g.VirtualKey != "vk" {
				t.Errorf("round trip:\n got %+v\nwant %+v", g, want)
			}
			if _, _, _, err := db.Logs(ctx, &Filter{}, 10, 0); err != ErrNoScope {
				t.Errorf("unscoped query: err %v, want ErrNoScope", err)
			}
			for _, tc := range []struct {
				name string
				f    Filter
				want int
			}{
				{"model", Filter{Workspace: "ws-a", Models: []string{"gpt-4o"}}, 1},
				{"status", Filter{Workspace: "ws-a", Statuses: []int{500}}, 0},
				{"statuses", Filter{Workspace: "ws-a", Statuses: []int{200, 429}}, 2},
				{"models", Filter{Workspace: "ws-a", Models: []string{"gpt-4o", "mystery", "nothing"}}, 2},
				{"unknown model", Filter{Workspace: "ws-a", Models: []string{"nothing"}}, 0},
				{"unknown workspace", Filter{Workspace: "ws-z"}, 0},
				{"metadata", Filter{Workspace: "ws-a", Metadata: map[string]string{"team": "blue"}}, 1},
				{"metadata miss", Filter{Workspace: "ws-a", Metadata: map[string]string{"team": "red"}}, 0},
				{"trace", Filter{Workspace: "ws-a", TraceID: a.TraceID}, 1},
				{"trace of other workspace", Filter{Workspace: "ws-a", TraceID: other.TraceID}, 0},
				{"time", Filter{Workspace: "ws-a", From: t0.Add(30 * time.Second)}, 1},
				{"organisation", Filter{Organisation: "org"}, 3},
			} {
				_, n, _, err := db.Logs(ctx, &tc.f, 10, 0)
				if err != nil || int(n) != tc.want {
					t.Errorf("%s: %d records, err %v; want %d", tc.name, n, err, tc.want)
				}
			}
		})
	}
}

func TestSeriesGroupsAgreeWithRecords(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			var recs []Record
			var wantCost int64
			for i := 0; i < 300; i++ {
				model := []string{"a", "b", "c"}[i%3]
				status := 200
				if i%10 == 0 {
					status = 502
				}
				r := rec("ws", time.Duration(i)*time.Minute, model, status, int64(1000+i*7))
				r.Metadata = map[string]string{"user": []string{"u1", "u2"}[i%2]}
				if i%5 == 0 {
					r.CacheState = "HIT"
				}
				wantCost += r.CostNanoUSD
				recs = append(recs, r)
			}
			if err := db.Insert(ctx, recs); err != nil {
				t.Fatal(err)
			}
			f := &Filter{Workspace: "ws", From: t0, To: t0.Add(24 * time.Hour)}
			pts, all, err := db.Series(ctx, f, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if len(pts) != 5 || all.Requests != 300 || all.CostNanoUSD != wantCost || all.Errors != 30 || all.SimpleHits != 60 {
				t.Fatalf("series: %d points, totals %+v; want 5 points, 300 requests, cost %d, 30 errors, 60 hits", len(pts), all, wantCost)
			}
			if !pts[0].Start.Equal(t0) || pts[0].Requests != 60 {
				t.Errorf("first bucket %v with %d requests, want %v with 60", pts[0].Start, pts[0].Requests, t0)
			}
			groups, n, err := db.Groups(ctx, f, ByModel, "", 2, 0)
			if err != nil || n != 3 || len(groups) != 2 || groups[0].Requests != 100 {
				t.Fatalf("groups by model: %+v total %d err %v", groups, n, err)
			}
			meta, n, err := db.Groups(ctx, f, "", "user", 10, 0)
			if err != nil || n != 2 || meta[0].Requests != 150 {
				t.Fatalf("groups by metadata: %+v total %d err %v", meta, n, err)
			}
			var sum int64
			for _, g := range meta {
				sum += g.CostNanoUSD
			}
			if sum != wantCost {
				t.Errorf("metadata groups sum to %d, records to %d", sum, wantCost)
			}
			bins, err := db.LatencyBins(ctx, f, 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range bins {
				if m[120000] != 300 {
					t.Errorf("latency bins %v, want 300 at 120000 µs", m)
				}
			}
			if _, _, err := db.Groups(ctx, f, "metadata; DROP TABLE llm_ledger", "", 10, 0); err == nil {
				t.Error("an unknown grouping was accepted")
			}
			if _, _, err := db.Groups(ctx, f, "", `x"); DROP`, 10, 0); err == nil {
				t.Error("an invalid metadata key was accepted")
			}
		})
	}
}

func TestMigrateConcurrentlyOnce(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			dbs := make([]*DB, 4)
			for i := range dbs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dbs[i], errs[i] = Open(context.Background(), dsn)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("open %d: %v", i, err)
				}
				defer dbs[i].Close()
			}
			var n int
			if err := dbs[0].db.QueryRow("SELECT COUNT(*) FROM llm_ledger_schema").Scan(&n); err != nil || n != len(migrations) {
				t.Fatalf("schema rows %d (err %v), want one per step (%d)", n, err, len(migrations))
			}
		})
	}
}

func TestSweepDeletesOnlyExpired(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			if err := db.Insert(ctx, []Record{rec("ws", 0, "m", 200, 1), rec("ws", 48*time.Hour, "m", 200, 1)}); err != nil {
				t.Fatal(err)
			}
			n, err := db.Sweep(ctx, t0.Add(time.Hour))
			if err != nil || n != 1 {
				t.Fatalf("swept %d, err %v; want 1", n, err)
			}
			_, left, _, _ := db.Logs(ctx, &Filter{Workspace: "ws"}, 10, 0)
			if left != 1 {
				t.Errorf("%d records left, want 1", left)
			}
		})
	}
}

// TestRollupAgreesWithRecords checks that series and groups read from
// the hourly rollup plus the partial hours at the ends equal the sums of
// the records themselves, for ranges on and off the hour, with records
// inserted in several batches (so rollup rows are updated, not only
// created).
func TestRollupAgreesWithRecords(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			var recs []Record
			for i := 0; i < 600; i++ {
				at := time.Duration(i*i%36000) * time.Second // spread over 10 hours
				r := rec("ws", at, []string{"a", "b"}[i%2], []int{200, 429, 500}[i%3], int64(i*13+1))
				if i%7 == 0 {
					r.CostKnown = false
				}
				recs = append(recs, r)
			}
			for i := 0; i < len(recs); i += 100 {
				if err := db.Insert(ctx, recs[i:i+100]); err != nil {
					t.Fatal(err)
				}
			}
			for _, rg := range []struct{ from, to time.Time }{
				{t0, t0.Add(10 * time.Hour)},
				{t0.Add(17 * time.Minute), t0.Add(9*time.Hour + 3*time.Second)},
				{t0.Add(90 * time.Minute), t0.Add(100 * time.Minute)},
				{time.Time{}, t0.Add(5*time.Hour + time.Minute)},
				{t0.Add(time.Hour + time.Second), time.Time{}},
			} {
				var want Totals
				wantModel := map[string]int64{}
				for _, r := range recs {
					if (!rg.from.IsZero() && r.Time.Before(rg.from)) || (!rg.to.IsZero() && !r.Time.Before(rg.to)) {
						continue
					}
					want.Requests++
					if r.Status >= 400 {
						want.Errors++
					}
					if r.CostKnown {
						want.CostNanoUSD += r.CostNanoUSD
					} else {
						want.CostUnknown++
					}
					wantModel[r.Model] += r.CostNanoUSD * b2i(r.CostKnown)
				}
				f := &Filter{Workspace: "ws", From: rg.from, To: rg.to}
				_, got, err := db.Series(ctx, f, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if got.Requests != want.Requests || got.Errors != want.Errors || got.CostNanoUSD != want.CostNanoUSD || got.CostUnknown != want.CostUnknown {
					t.Errorf("range %v–%v: series totals %+v, records %+v", rg.from, rg.to, got, want)
				}
				groups, _, err := db.Groups(ctx, f, ByModel, "", 10, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, g := range groups {
					if g.CostNanoUSD != wantModel[g.Value] {
						t.Errorf("range %v–%v: model %s costs %d in groups, %d in records", rg.from, rg.to, g.Value, g.CostNanoUSD, wantModel[g.Value])
					}
				}
			}
		})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestLogsTotalIsCapped: the logs total counts up to MaxLogsTotal and
// says when it stopped there; below it the count is exact, and the page
// is the newest records either way.
func TestLogsTotalIsCapped(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			recs := make([]Record, MaxLogsTotal+5)
			for i := range recs {
				recs[i] = rec("ws", time.Duration(i)*time.Millisecond, "gpt-4o", 200, 1)
				recs[i].TraceID = fmt.Sprintf("trace-%d", i)
			}
			recs[0].Model = "rare"
			if err := db.Insert(ctx, recs); err != nil {
				t.Fatal(err)
			}
			got, total, capped, err := db.Logs(ctx, &Filter{Workspace: "ws"}, 3, 0)
			if err != nil || total != MaxLogsTotal || !capped || len(got) != 3 || got[0].TraceID != recs[len(recs)-1].TraceID {
				t.Fatalf("all: %d records from %v, total %d capped %t, err %v; want 3 newest of %d capped", len(got), got, total, capped, err, MaxLogsTotal)
			}
			_, total, capped, err = db.Logs(ctx, &Filter{Workspace: "ws", Models: []string{"rare"}}, 3, 0)
			if err != nil || total != 1 || capped {
				t.Fatalf("one model: total %d capped %t err %v, want exactly 1", total, capped, err)
			}
		})
	}
}
