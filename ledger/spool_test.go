package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// errAway is what a switchable store answers while it is down: a lost
// connection, as pgx reports one.
var errAway = &pgconn.PgError{Code: "08006", Message: "connection failure"}

// switchStore is a real database the test can take away: while down,
// every write, position read and ping fails as an unreachable database's
// would. lostAnswers makes that many InsertSpooled calls commit and then
// fail, as when the connection drops before COMMIT's answer arrives.
type switchStore struct {
	*DB
	down        atomic.Bool
	lostAnswers atomic.Int32
	// allow, when positive, is how many more InsertSpooled calls succeed
	// before the store goes down by itself (a crash mid-replay).
	allow atomic.Int32
}

func (s *switchStore) Insert(ctx context.Context, recs []Record) error {
	if s.down.Load() {
		return errAway
	}
	return s.DB.Insert(ctx, recs)
}

func (s *switchStore) InsertSpooled(ctx context.Context, seg string, through uint64, recs []Record) error {
	if s.allow.Load() > 0 && s.allow.Add(-1) == 0 {
		s.down.Store(true)
	}
	if s.down.Load() {
		return errAway
	}
	if err := s.DB.InsertSpooled(ctx, seg, through, recs); err != nil {
		return err
	}
	if s.lostAnswers.Load() > 0 && s.lostAnswers.Add(-1) >= 0 {
		return errAway
	}
	return nil
}

func (s *switchStore) SpoolPosition(ctx context.Context, seg string) (uint64, error) {
	if s.down.Load() {
		return 0, errAway
	}
	return s.DB.SpoolPosition(ctx, seg)
}

func (s *switchStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return errAway
	}
	return s.DB.Ping(ctx)
}

// Close leaves the database open: a test reopens a ledger on it.
func (s *switchStore) Close() error { return nil }

// numbered returns n records of workspace ws whose trace ids are their
// order, from index from.
func numbered(ws string, from, n int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = rec(ws, time.Duration(from+i)*time.Millisecond, "gpt-4o", 200, 7)
		out[i].TraceID = fmt.Sprintf("%08d", from+i)
	}
	return out
}

// traces returns the trace ids of workspace ws's records in the order
// the database stored them (by id).
func traces(t *testing.T, db *DB, ws string) []string {
	t.Helper()
	rows, err := db.db.Query(db.d.bind("SELECT trace_id FROM llm_ledger WHERE "+dimEq("workspace_d")+" ORDER BY id"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// wantInOrder fails unless got is exactly the traces 0..n-1, in order.
func wantInOrder(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		if len(got) > 0 {
			t.Logf("first %s last %s", got[0], got[len(got)-1])
			for i := 1; i < len(got); i++ {
				a, _ := strconv.Atoi(got[i-1])
				b, _ := strconv.Atoi(got[i])
				if b != a+1 {
					t.Logf("gap after %s: %s", got[i-1], got[i])
				}
			}
		}
		t.Fatalf("the database holds %d records, want %d", len(got), n)
	}
	for i, s := range got {
		if v, _ := strconv.Atoi(s); v != i {
			t.Fatalf("record %d is trace %s: out of order or duplicated", i, s)
		}
	}
}

func openSpoolT(t *testing.T, dir string, max int64) *Spool {
	t.Helper()
	sp, err := OpenSpool(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func syncWithin(t *testing.T, l *Ledger, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Sync(ctx)
}

// TestSpoolKeepsRecordsWhileStoreIsAway: while the store is away,
// records go to the spool; when it returns they are all written, in the
// order recorded, once, and the writer writes directly again.
func TestSpoolKeepsRecordsWhileStoreIsAway(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ss := &switchStore{DB: db}
			dir := filepath.Join(t.TempDir(), "spool")
			l := New(ss, Config{Batch: 50, Flush: 10 * time.Millisecond, Retention: -1, Spool: openSpoolT(t, dir, 0)})
			defer l.Close()
			spooled := testutil.ToFloat64(recordsSpooled)
			recs := numbered("w", 0, 300)
			for i := 0; i < 100; i++ {
				l.Add(&recs[i])
			}
			if err := syncWithin(t, l, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			ss.down.Store(true)
			for i := 100; i < 250; i++ {
				l.Add(&recs[i])
			}
			if err := syncWithin(t, l, 300*time.Millisecond); err == nil {
				t.Fatal("Sync returned while the store was away")
			}
			if got := testutil.ToFloat64(recordsSpooled) - spooled; got != 150 {
				t.Errorf("spooled %v records, want the 150 recorded while away", got)
			}
			if l.spool.Bytes() == 0 || l.lag() <= 0 || l.up.Load() {
				t.Errorf("spool %d bytes, lag %v, up %v: the metrics do not show the outage", l.spool.Bytes(), l.lag(), l.up.Load())
			}
			ss.down.Store(false)
			for i := 250; i < 300; i++ {
				l.Add(&recs[i])
			}
			if err := syncWithin(t, l, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			wantInOrder(t, traces(t, db, "w"), 300)
			if l.spool.Pending() != 0 || !l.up.Load() {
				t.Errorf("after the return: %d pending, up %v", l.spool.Pending(), l.up.Load())
			}
			// Back to direct writes: the sealed segment is deleted.
			deadline := time.Now().Add(10 * time.Second)
			for l.spool.Bytes() != 0 && time.Now().Before(deadline) {
				l.Add(&numbered("w2", 0, 1)[0])
				_ = syncWithin(t, l, 5*time.Second)
			}
			if l.spool.Bytes() != 0 {
				t.Errorf("the spool still holds %d bytes once written back", l.spool.Bytes())
			}
		})
	}
}

// TestSpoolExactlyOnceAfterCrash: a replay cut short (the store goes
// away after some batches, the process stops) and a commit whose answer
// was lost both leave the database with each record once: the next
// replay asks the database where each segment stands.
func TestSpoolExactlyOnceAfterCrash(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			dir := filepath.Join(t.TempDir(), "spool")
			const n = 1000
			recs := numbered("w", 0, n)

			// Run 1: the store is away; everything is spooled, then the
			// process stops.
			ss := &switchStore{DB: db}
			ss.down.Store(true)
			l := New(ss, Config{Batch: 40, Flush: 10 * time.Millisecond, Retention: -1, Spool: openSpoolT(t, dir, 0)})
			for i := range recs {
				l.Add(&recs[i])
			}
			_ = syncWithin(t, l, 200*time.Millisecond)
			l.Close()

			// Run 2: the store returns, takes five batches (one of whose
			// answers is lost) and goes away again mid-replay.
			ss = &switchStore{DB: db}
			ss.lostAnswers.Store(1)
			ss.allow.Store(6)
			l = New(ss, Config{Batch: 40, Flush: 10 * time.Millisecond, Retention: -1, Spool: openSpoolT(t, dir, 0)})
			deadline := time.Now().Add(10 * time.Second)
			for !ss.down.Load() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			l.Close()
			t.Logf("run 2 wrote %d", len(traces(t, db, "w")))
			if got := len(traces(t, db, "w")); got == 0 || got >= n {
				t.Fatalf("run 2 wrote %d records, want part of the spool", got)
			}

			// Run 3: the store stays; the rest is written, nothing twice.
			ss = &switchStore{DB: db}
			l = New(ss, Config{Batch: 40, Flush: 10 * time.Millisecond, Retention: -1, Spool: openSpoolT(t, dir, 0)})
			if err := syncWithin(t, l, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			l.Close()
			wantInOrder(t, traces(t, db, "w"), n)
			_, all, err := db.Series(context.Background(), &Filter{Workspace: "w"}, time.Hour)
			if err != nil || all.Requests != n || all.CostNanoUSD != 7*n {
				t.Errorf("rollup %+v err %v: the sums must count each record once", all, err)
			}
		})
	}
}

// TestSpoolBoundDropsAndCounts: beyond its bound the spool keeps no
// more; each record not kept is counted dropped, and those kept are
// written when the store returns.
func TestSpoolBoundDropsAndCounts(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "ledger.db"))
	ss := &switchStore{DB: db}
	ss.down.Store(true)
	const bound = 20_000
	l := New(ss, Config{Batch: 25, Flush: 10 * time.Millisecond, Retention: -1, Spool: openSpoolT(t, filepath.Join(t.TempDir(), "spool"), bound)})
	defer l.Close()
	dropped, spooled := testutil.ToFloat64(recordsDropped), testutil.ToFloat64(recordsSpooled)
	recs := numbered("w", 0, 500)
	for i := range recs {
		l.Add(&recs[i])
	}
	_ = syncWithin(t, l, 300*time.Millisecond)
	kept := testutil.ToFloat64(recordsSpooled) - spooled
	lost := testutil.ToFloat64(recordsDropped) - dropped
	if kept == 0 || kept+lost != 500 || lost == 0 {
		t.Fatalf("spooled %v + dropped %v, want 500 with both non-zero", kept, lost)
	}
	if b := l.spool.Bytes(); b > bound {
		t.Errorf("the spool holds %d bytes, beyond its bound of %d", b, bound)
	}
	ss.down.Store(false)
	if err := syncWithin(t, l, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := len(traces(t, db, "w")); float64(got) != kept {
		t.Errorf("wrote %d records, want the %v spooled", got, kept)
	}
}

// TestSpoolFilesArePrivate: the spool's directory is 0700 and its files
// 0600, whatever the umask.
func TestSpoolFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "spool")
	sp := openSpoolT(t, dir, 0)
	defer sp.Close()
	if _, err := sp.Append(numbered("w", 0, 3)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spool directory %v %v, want drwx------", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) < 2 {
		t.Fatalf("spool holds %d files, want the lock and a segment", len(entries))
	}
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want -rw-------", e.Name(), fi.Mode())
		}
	}
}

// TestSpoolSurvivesTornTail: a frame cut short by a crash ends its
// segment; the records before it are kept, in order.
func TestSpoolSurvivesTornTail(t *testing.T) {
	dir := t.TempDir()
	sp := openSpoolT(t, dir, 0)
	if _, err := sp.Append(numbered("w", 0, 10)); err != nil {
		t.Fatal(err)
	}
	seg := sp.segs[0]
	sp.Close()
	half := appendFrame(nil, &numbered("w", 10, 1)[0])
	f, err := os.OpenFile(seg.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(half[:len(half)/2])
	f.Close()
	sp = openSpoolT(t, dir, 0)
	defer sp.Close()
	if sp.Pending() != 10 {
		t.Fatalf("reopened spool holds %d records, want the 10 intact", sp.Pending())
	}
	head, _ := sp.head()
	got, last, err := sp.read(head, 100)
	if err != nil || last != 10 || len(got) != 10 || got[9].TraceID != "00000009" || got[0].CostNanoUSD != 7 || !got[0].CostKnown {
		t.Fatalf("read %d records (last %d) err %v: %+v", len(got), last, err, got)
	}
}

// TestSpoolIsOneProcesss: a second user of a spool directory is refused
// (two replaying one spool would write its records twice).
func TestSpoolIsOneProcesss(t *testing.T) {
	dir := t.TempDir()
	sp := openSpoolT(t, dir, 0)
	defer sp.Close()
	if _, err := OpenSpool(dir, 0); !errors.Is(err, errSpoolLocked) {
		t.Fatalf("second OpenSpool: %v, want the spool locked", err)
	}
}

// TestSpoolDefaultHoldsAnHour: the default bound holds an hour of
// gateway-shaped records at 1,000 requests a second.
func TestSpoolDefaultHoldsAnHour(t *testing.T) {
	r := Record{Time: time.Now(), TraceID: "0193a7b2-4c1d-7e3f-9a8b-1c2d3e4f5a6b", APIKey: "team-backend-service",
		Workspace: "ws-3f2a9c1e-5b7d-4e8f-a0b1-c2d3e4f5a6b7", Organisation: "org-8e7d6c5b-4a39-4281-b0c1-d2e3f4a5b6c7",
		VirtualKey: "openai-prod", Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Operation: "chat.completions",
		Status: 200, Stream: true, InputTokens: 1234, OutputTokens: 567, CachedTokens: 1024, CostNanoUSD: 123456,
		CostKnown: true, Latency: 2345 * time.Millisecond, TTFT: 345 * time.Millisecond, CacheState: "MISS",
		Metadata: map[string]string{"_user": "alice@example.com", "env": "production"}}
	n := len(appendFrame(nil, &r))
	t.Logf("a gateway-shaped record spools in %d bytes; the default bound holds %d of them", n, DefaultSpoolBytes/n)
	if n > typicalSpooled {
		t.Errorf("a typical record spools in %d bytes, more than the %d the default bound assumes", n, typicalSpooled)
	}
	if DefaultSpoolBytes/n < 3600*1000 {
		t.Errorf("the default bound holds %d records, less than an hour at 1,000/s", DefaultSpoolBytes/n)
	}
	var back Record
	if _, err := readFrame(appendFrame(nil, &r), &back); err != nil || back.Model != r.Model || back.Metadata["env"] != "production" ||
		back.Latency != r.Latency || !back.Time.Equal(r.Time) || !back.Stream || back.CachedTokens != 1024 {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

// TestSpoolFrameVersions: a frame keeps the error type (version 2), and
// a version-1 frame an older gateway left in the spool still reads, its
// record without one.
func TestSpoolFrameVersions(t *testing.T) {
	r := numbered("w", 1, 1)[0]
	r.ErrorType = "content_policy"
	var back Record
	if _, err := readFrame(appendFrame(nil, &r), &back); err != nil || back.ErrorType != "content_policy" || back.TraceID != r.TraceID {
		t.Fatalf("version 2: %+v %v", back, err)
	}
	// Version 1 is version 2 without the error type's bytes.
	r.ErrorType = ""
	v2 := appendFrame(nil, &r)
	p := append([]byte{1}, v2[frameHeader+1:len(v2)-1]...)
	v1 := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	v1 = binary.LittleEndian.AppendUint32(v1, crc32.Checksum(p, castagnoli))
	v1 = append(v1, p...)
	back = Record{}
	if n, err := readFrame(v1, &back); err != nil || n != len(v1) || back.TraceID != r.TraceID || back.ErrorType != "" {
		t.Fatalf("version 1: %d %+v %v", n, back, err)
	}
}
