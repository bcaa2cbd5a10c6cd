package ledger

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// writes is how many writes of op were timed.
func writes(t *testing.T, op string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := storeDuration.WithLabelValues(op).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestStoreWriteMetrics: each batch write to the database is timed under
// its op, and each failed one counted, spooled or not: while the store
// is away the inserts fail (the records go to the spool), and once it is
// back the replay writes them, timed as replays.
func TestStoreWriteMetrics(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "ledger.db"))
	ss := &switchStore{DB: db}
	l := New(ss, Config{Batch: 10, Flush: 5 * time.Millisecond, Retention: -1, Spool: openSpoolT(t, filepath.Join(t.TempDir(), "spool"), 0)})
	defer l.Close()
	ins0, rep0, insErr0 := writes(t, "insert"), writes(t, "replay"), testutil.ToFloat64(insertErrors)
	recs := numbered("m", 0, 20)
	for i := 0; i < 10; i++ {
		l.Add(&recs[i])
	}
	if err := syncWithin(t, l, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := writes(t, "insert") - ins0; got < 1 {
		t.Fatalf("%d inserts timed, want at least the one batch", got)
	}
	if got := testutil.ToFloat64(insertErrors) - insErr0; got != 0 {
		t.Fatalf("%v insert errors while the store answers", got)
	}
	ss.down.Store(true)
	for i := 10; i < 20; i++ {
		l.Add(&recs[i])
	}
	// The writer tries the store, fails and spools the records.
	for deadline := time.Now().Add(10 * time.Second); l.spool.Pending() < 10 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(insertErrors) - insErr0; got < 1 || l.spool.Pending() < 10 {
		t.Errorf("%v insert errors while the store is away (%d records spooled), want at least 1", got, l.spool.Pending())
	}
	ss.down.Store(false)
	if err := syncWithin(t, l, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := writes(t, "replay") - rep0; got < 1 {
		t.Errorf("%d replays timed after the store returned, want at least 1", got)
	}
	wantInOrder(t, traces(t, db, "m"), 20)
}
