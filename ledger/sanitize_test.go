package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestHostileTextKeepsTheBatch: a request whose model name or key name
// holds a NUL byte or invalid UTF-8 (PostgreSQL's text refuses both) is
// recorded with U+FFFD in their place, and the other tenants' records of
// the same batch are written with it.
func TestHostileTextKeepsTheBatch(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			l := New(db, Config{Batch: 100, Flush: time.Hour})
			entries := []observe.Entry{
				{Workspace: "w1", KeyName: "alice", Model: "gpt-4o-mini"},
				{Workspace: "w2", KeyName: "bob", Model: "gpt\x00-4o"},
				{Workspace: "w3", KeyName: "ca\x00rol", Model: "gpt-4o"},
				{Workspace: "w4", KeyName: "dave", Model: "gpt-\xff\xfe", Provider: "open\x00ai",
					Metadata: map[string]string{"k": "v\x00\xc3", "k\x00": "x"}, TraceID: "t\x00"},
				{Workspace: "w5", KeyName: "erin", Model: "o3"},
			}
			for i := range entries {
				entries[i].Start = time.Now()
				entries[i].Status = 200
				entries[i].Usage = &providers.Usage{PromptTokens: 1}
				l.Record(&entries[i])
			}
			if err := l.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, want := range []struct{ ws, key, model string }{
				{"w1", "alice", "gpt-4o-mini"},
				{"w2", "bob", "gpt\uFFFD-4o"},
				{"w3", "ca\uFFFDrol", "gpt-4o"},
				{"w4", "dave", "gpt-\uFFFD"},
				{"w5", "erin", "o3"},
			} {
				recs, _, _, err := db.Logs(context.Background(), &Filter{Workspace: want.ws}, 10, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != 1 || recs[0].APIKey != want.key || recs[0].Model != want.model {
					t.Errorf("workspace %s: %d records %+v, want one of key %q model %q", want.ws, len(recs), recs, want.key, want.model)
				}
			}
			// The metadata stays queryable (PostgreSQL's jsonb refuses
			// \u0000 in the JSON text too).
			recs, _, _, err := db.Logs(context.Background(), &Filter{Workspace: "w4", Metadata: map[string]string{"k": "v\uFFFD\uFFFD"}}, 10, 0)
			if err != nil || len(recs) != 1 || recs[0].TraceID != "t\uFFFD" || recs[0].Provider != "open\uFFFDai" || recs[0].Metadata["k\uFFFD"] != "x" {
				t.Errorf("metadata query: %+v %v", recs, err)
			}
			l.Close()
		})
	}
}

func TestCleanText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"gpt-4o", "gpt-4o"},
		{"é日本", "é日本"},
		{"a\x00b", "a\uFFFDb"},
		{"\x00\x00", "\uFFFD\uFFFD"},
		{"a\xffb", "a\uFFFDb"},
		{"\xc3", "\uFFFD"},
		{"é\x00\xff", "é\uFFFD\uFFFD"},
	} {
		if got := cleanText(tc.in); got != tc.want {
			t.Errorf("cleanText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = cleanText("gpt-4o-mini-2024-07-18") }); n != 0 {
		t.Errorf("a clean string allocates %v times", n)
	}
}

// TestRefusedRecordAloneIsDropped: a record the database still refuses
// (here a status beyond PostgreSQL's INTEGER) costs only itself: the
// writer retries the batch record by record, writes the others and
// counts the one refused.
func TestRefusedRecordAloneIsDropped(t *testing.T) {
	db := openTest(t, postgresTestDSN(t))
	l := New(db, Config{Batch: 100, Flush: time.Hour})
	rejected := testutil.ToFloat64(recordsRejected)
	for i := 0; i < 10; i++ {
		r := rec("w", time.Duration(i)*time.Second, "gpt-4o", 200, 5)
		if i == 4 {
			r.Status = 1 << 40
		}
		l.Add(&r)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, all, err := db.Series(context.Background(), &Filter{Workspace: "w"}, time.Hour)
	if err != nil || all.Requests != 9 {
		t.Fatalf("written %+v err %v; want the 9 records the database accepts", all, err)
	}
	if got := testutil.ToFloat64(recordsRejected) - rejected; got != 1 {
		t.Errorf("rejected +%v, want +1", got)
	}
	l.Close()
}
