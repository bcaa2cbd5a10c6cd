package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// v7At is a UUIDv7 whose time is at.
func v7At(at time.Time) string {
	var u uuid.UUID
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6], u[8], u[15] = 0x70, 0x80, 1
	return u.String()
}

func TestTimeOrdered(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"made up now", uuid.Must(uuid.NewV7()).String(), true},
		{"v7 a minute ago", v7At(now.Add(-time.Minute)), true},
		{"v7 upper case", strings.ToUpper(v7At(now)), true},
		{"v7 two hours ago", v7At(now.Add(-2 * time.Hour)), false},
		{"v7 two hours ahead", v7At(now.Add(2 * time.Hour)), false},
		{"v4", uuid.NewString(), false},
		{"OpenTelemetry trace id", "4bf92f3577b34da6a3ce929d0e0e4736", false},
		{"v7 shape, not hex", "0192zzzz-0000-7000-8000-000000000001", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := timeOrdered(tt.id, now); got != tt.want {
				t.Errorf("timeOrdered(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

// sameBucket returns an id other than id in id's trace bucket.
func sameBucket(id string) string {
	want := uint64(traceHash(id)) % traceBuckets
	for i := 0; ; i++ {
		c := fmt.Sprintf("decoy-%d", i)
		if uint64(traceHash(c))%traceBuckets == want {
			return c
		}
	}
}

// TestTraceLookupEitherIndex: a record is found by its trace id whether
// the gateway made it up (the text index) or a client sent it (the
// bucket index), and only that record, not another of the same bucket;
// a time range narrows the bucket's lookup and still finds it. Records
// of client ids carry a bucket, made-up ones none.
func TestTraceLookupEitherIndex(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			at := t0.Add(time.Minute)
			ids := map[string]string{
				"made up":    v7At(at.Add(-120 * time.Millisecond)),
				"v4":         uuid.NewString(),
				"otel":       "4bf92f3577b34da6a3ce929d0e0e4736",
				"old v7":     v7At(at.Add(-48 * time.Hour)),
				"any string": "checkout-flow/42",
			}
			ids["decoy of a v4"] = sameBucket(ids["v4"])
			var recs []Record
			for name, id := range ids {
				r := rec("ws", time.Minute, "m", 200, 1)
				r.TraceID, r.Metadata = id, map[string]string{"name": name}
				recs = append(recs, r)
			}
			if err := db.Insert(ctx, recs); err != nil {
				t.Fatal(err)
			}
			for name, id := range ids {
				got, total, _, err := db.Logs(ctx, &Filter{Workspace: "ws", TraceID: id}, 10, 0)
				if err != nil || total != 1 || got[0].TraceID != id {
					t.Errorf("%s (%q): %d records %v (%v), want its one", name, id, total, got, err)
				}
				_, total, _, err = db.Logs(ctx, &Filter{Workspace: "ws", TraceID: id, From: at.Add(-time.Second), To: at.Add(time.Second)}, 10, 0)
				if err != nil || total != 1 {
					t.Errorf("%s within its time: %d records (%v), want 1", name, total, err)
				}
				_, total, _, err = db.Logs(ctx, &Filter{Workspace: "ws", TraceID: id, From: at.Add(time.Second)}, 10, 0)
				if err != nil || total != 0 {
					t.Errorf("%s after its time: %d records (%v), want none", name, total, err)
				}
			}
			var made, sent int
			rows, err := db.db.QueryContext(ctx, "SELECT trace_id, trace_bucket FROM llm_ledger")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var bucket *int64
				if err := rows.Scan(&id, &bucket); err != nil {
					t.Fatal(err)
				}
				switch {
				case bucket == nil:
					made++
				case *bucket == int64(uint64(traceHash(id))%traceBuckets):
					sent++
				default:
					t.Errorf("%q stored in bucket %d", id, *bucket)
				}
			}
			if made != 1 || sent != len(recs)-1 {
				t.Errorf("%d records in the text index and %d in buckets, want the made-up one and the %d others", made, sent, len(recs)-1)
			}
		})
	}
}

// TestTraceLookupUsesIndexes: SQLite answers a trace lookup from the two
// partial indexes and reads the records they name by id, never every
// record of the scope.
func TestTraceLookupUsesIndexes(t *testing.T) {
	db := openTest(t, stores[0].dsn(t))
	where, args, err := db.where(&Filter{Organisation: "org", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.db.Query("EXPLAIN QUERY PLAN SELECT llm_ledger.id"+where, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	all := strings.Join(plan, "\n")
	if !strings.Contains(all, "llm_ledger_trace_made") || !strings.Contains(all, "llm_ledger_trace_sent") {
		t.Errorf("plan does not use both trace indexes:\n%s", all)
	}
	for _, step := range plan {
		if strings.HasPrefix(step, "SCAN llm_ledger") || strings.Contains(step, "llm_ledger_org_ts") {
			t.Errorf("plan reads the scope's records (%q):\n%s", step, all)
		}
	}
}

// TestMigrateToTraceKeys: records written before migration 5 keep their
// trace ids findable (they stay in the text index) beside new ones.
func TestMigrateToTraceKeys(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			writeOldRecord(t, dsn, 4, "client-trace-1")
			db := openTest(t, dsn)
			r := rec("ws", time.Second, "m", 200, 1)
			r.TraceID = "client-trace-2"
			if err := db.Insert(context.Background(), []Record{r}); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"client-trace-1", "client-trace-2"} {
				if _, total, _, err := db.Logs(context.Background(), &Filter{Workspace: "ws", TraceID: id}, 10, 0); err != nil || total != 1 {
					t.Errorf("%s after the migration: %d records (%v), want 1", id, total, err)
				}
			}
		})
	}
}
