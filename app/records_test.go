package app

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestRecordsMode: where the records live for each configuration: SQL by
// default with a ledger on disk or PostgreSQL, else Redis with redis,
// else Caddy's storage; an explicit choice wins, and a wrong one is
// refused.
func TestRecordsMode(t *testing.T) {
	redis := &RedisConfig{Address: "127.0.0.1:6379"}
	for _, tc := range []struct {
		name    string
		records string
		ledger  *LedgerConfig
		redis   *RedisConfig
		want    string
		err     string
	}{
		{name: "nothing configured", want: RecordsStorage},
		{name: "redis only", redis: redis, want: RecordsRedis},
		{name: "a ledger", ledger: &LedgerConfig{}, want: RecordsSQL},
		{name: "a ledger and redis", ledger: &LedgerConfig{DSN: "postgres://x/y"}, redis: redis, want: RecordsSQL},
		{name: "an in-memory ledger keeps today's store", ledger: &LedgerConfig{DSN: ":memory:"}, redis: redis, want: RecordsRedis},
		{name: "explicit storage with a ledger", records: "storage", ledger: &LedgerConfig{}, redis: redis, want: RecordsStorage},
		{name: "explicit redis with a ledger", records: "redis", ledger: &LedgerConfig{}, redis: redis, want: RecordsRedis},
		{name: "explicit sql without a ledger", records: "sql", want: RecordsSQL},
		{name: "redis without redis", records: "redis", err: "needs a redis block"},
		{name: "unknown", records: "etcd", err: "must be sql, storage or redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &App{Redis: tc.redis}
			a.Records, a.Ledger = tc.records, tc.ledger
			got, err := a.recordsMode()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("mode = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRecordsDSN: SQL records live in the ledger's PostgreSQL, or in
// llm-records.db beside the ledger's SQLite file (Caddy's data directory
// without a ledger file).
func TestRecordsDSN(t *testing.T) {
	for _, tc := range []struct {
		ledger *LedgerConfig
		want   string
		err    bool
	}{
		{ledger: nil, want: filepath.Join(caddy.AppDataDir(), recordsFile)},
		{ledger: &LedgerConfig{}, want: filepath.Join(caddy.AppDataDir(), recordsFile)},
		{ledger: &LedgerConfig{DSN: "/var/lib/gw/ledger.db"}, want: "/var/lib/gw/llm-records.db"},
		{ledger: &LedgerConfig{DSN: "postgres://gw@db/gw"}, want: "postgres://gw@db/gw"},
		{ledger: &LedgerConfig{DSN: ":memory:"}, err: true},
		{ledger: &LedgerConfig{DSN: "{env.SQLREC_UNSET_DSN}"}, err: true},
	} {
		a := &App{}
		a.Ledger = tc.ledger
		got, err := a.recordsDSN()
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ledger %+v: dsn = %q, %v; want %q (error %v)", tc.ledger, got, err, tc.want, tc.err)
		}
	}
}

// TestUnmarshalRecords: the Caddyfile option takes one of the three
// words.
func TestUnmarshalRecords(t *testing.T) {
	for in, ok := range map[string]bool{"records sql": true, "records storage": true, "records redis": true,
		"records": false, "records sql extra": false, "records etcd": false} {
		a := &App{}
		d := caddyfile.NewTestDispenser(in)
		d.Next()
		err := a.unmarshalRecords(d)
		if (err == nil) != ok {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestRecordsJSON: the choice is the llm app's top-level "records".
func TestRecordsJSON(t *testing.T) {
	a := &App{}
	a.Records = RecordsSQL
	b, err := json.Marshal(a)
	if err != nil || !strings.Contains(string(b), `"records":"sql"`) {
		t.Fatalf("%s %v", b, err)
	}
	var back App
	if err := json.Unmarshal([]byte(`{"records":"redis"}`), &back); err != nil || back.Records != RecordsRedis {
		t.Fatalf("%+v %v", back.Records, err)
	}
}
