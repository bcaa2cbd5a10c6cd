package sqlkv

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sqlkv/sqlkvtest"
)

// TestKV: what a record store relies on, on both databases: a stored
// record loads back, a missing one is fs.ErrNotExist, a folder lists its
// direct records (not deeper ones, not a sibling folder sharing a name
// prefix) or all of them, a deleted folder takes its records with it.
func TestKV(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			kv := open(t, name, dsn)
			for _, k := range []string{"a/b/1.json", "a/b/2.json", "a/b/c/3.json", "a/bb/4.json", "a/b"} {
				if err := kv.Store(ctx, k, []byte("v:"+k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := kv.Store(ctx, "a/b/1.json", []byte("again")); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name      string
				prefix    string
				recursive bool
				want      []string
			}{
				{"direct children only", "a/b", false, []string{"a/b/1.json", "a/b/2.json"}},
				{"a trailing slash is the same folder", "a/b/", false, []string{"a/b/1.json", "a/b/2.json"}},
				{"recursive, without the sibling a/bb", "a/b", true, []string{"a/b/1.json", "a/b/2.json", "a/b/c/3.json"}},
				{"top folder recursive", "a", true, []string{"a/b", "a/b/1.json", "a/b/2.json", "a/b/c/3.json", "a/bb/4.json"}},
			}
			for _, s := range steps {
				got, err := kv.List(ctx, s.prefix, s.recursive)
				if err != nil || !slices.Equal(got, s.want) {
					t.Errorf("%s: List(%q, %v) = %v, %v; want %v", s.name, s.prefix, s.recursive, got, err, s.want)
				}
			}
			if v, err := kv.Load(ctx, "a/b/1.json"); err != nil || string(v) != "again" {
				t.Errorf("Load after overwrite = %q, %v", v, err)
			}
			if _, err := kv.Load(ctx, "a/b/none.json"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Load of a missing key: %v, want fs.ErrNotExist", err)
			}
			if _, err := kv.List(ctx, "none", false); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("List of an empty folder: %v, want fs.ErrNotExist", err)
			}
			if keys, err := kvstore.ListKeys(ctx, kv, "none", false); err != nil || len(keys) != 0 {
				t.Errorf("ListKeys of an empty folder = %v, %v", keys, err)
			}
			for k, want := range map[string]bool{"a": true, "a/b/c": true, "a/b/1.json": true, "a/x": false, "a/b/1": false} {
				if got := kv.Exists(ctx, k); got != want {
					t.Errorf("Exists(%q) = %v, want %v", k, got, want)
				}
			}
			if st, err := kv.Stat(ctx, "a/b/2.json"); err != nil || !st.IsTerminal || st.Size != int64(len("v:a/b/2.json")) {
				t.Errorf("Stat = %+v, %v", st, err)
			}
			if err := kv.Delete(ctx, "a/b"); err != nil {
				t.Fatal(err)
			}
			if got, _ := kv.List(ctx, "a", true); !slices.Equal(got, []string{"a/bb/4.json"}) {
				t.Errorf("after deleting folder a/b: %v", got)
			}
			if err := kv.Delete(ctx, "a/none"); err != nil {
				t.Errorf("deleting a missing key: %v", err)
			}
			if err := kv.Store(ctx, "/lead", nil); err == nil {
				t.Error("a key with a leading slash was stored")
			}
		})
	}
}

// TestKindOf: each store's records get their kind, behind a Redis
// key_prefix too.
func TestKindOf(t *testing.T) {
	for key, want := range map[string]string{
		"llm_gateway/keys/api_keys/1.json":           "api_key",
		"fleet:llm_gateway/keys/virtual_keys/1.json": "virtual_key",
		"llm_gateway/keys/configs/1.json":            "config",
		"llm_gateway/keys/audit/o/w/1.json":          "audit",
		"llm_gateway/prompts/1.json":                 "prompt",
		"llm_gateway/policies/1.json":                "rate_limit_policy",
		"llm/usage-limits/1":                         "usage_limit_policy",
		"llm_gateway/keys/server_secret":             "meta",
	} {
		if got := KindOf(key); got != want {
			t.Errorf("KindOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestCompareAndSwap: a write from a stale value is refused, one from the
// stored value succeeds, a nil old creates only; seen from a second
// handle on the same database.
func TestCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			kv, other := pair(t, name, dsn)
			key := "llm_gateway/cas/x.json"
			steps := []struct {
				old, value string
				absent     bool
				want       bool
				stored     string
			}{
				{absent: true, value: "v1", want: true, stored: "v1"},
				{absent: true, value: "again", want: false, stored: "v1"},
				{old: "v0", value: "stale", want: false, stored: "v1"},
				{old: "v1", value: "v2", want: true, stored: "v2"},
				{old: "v1", value: "v3", want: false, stored: "v2"},
			}
			for i, s := range steps {
				var old []byte
				if !s.absent {
					old = []byte(s.old)
				}
				ok, err := kvstore.CompareAndSwap(ctx, kv, key, old, []byte(s.value))
				if err != nil || ok != s.want {
					t.Fatalf("step %d: swap = %v, %v; want %v", i, ok, err, s.want)
				}
				got, err := other.Load(ctx, key)
				if err != nil || string(got) != s.stored {
					t.Fatalf("step %d: stored %q, %v; want %q", i, got, err, s.stored)
				}
			}
		})
	}
}

// TestCompareAndSwapConcurrent: increments read, changed and swapped by
// writers on two handles at once lose none.
func TestCompareAndSwapConcurrent(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, name, dsn)
			const writers = 16
			key := "llm_gateway/cas/n.json"
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for i := range writers {
				kv := a
				if i%2 == 1 {
					kv = b
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						cur, err := kv.Load(ctx, key)
						var old []byte
						n := 0
						switch {
						case errors.Is(err, fs.ErrNotExist):
						case err != nil:
							errs <- err
							return
						default:
							old = cur
							n, _ = strconv.Atoi(string(cur))
						}
						ok, err := kv.CompareAndSwap(ctx, key, old, []byte(strconv.Itoa(n+1)))
						if err != nil {
							errs <- err
							return
						}
						if ok {
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got, _ := a.Load(ctx, key); string(got) != strconv.Itoa(writers) {
				t.Fatalf("%d increments stored %s", writers, got)
			}
		})
	}
}

// TestLock: a lock held by one instance keeps the other out until it is
// released; a lock whose holder died (its lease expired) is taken over.
func TestLock(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			a, b := pair(t, name, dsn)
			if err := a.Lock(ctx, "l"); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			err := b.Lock(short, "l")
			cancel()
			if err == nil {
				t.Fatal("a held lock was taken by another instance")
			}
			if err := a.Unlock(ctx, "l"); err != nil {
				t.Fatal(err)
			}
			if err := b.Lock(ctx, "l"); err != nil {
				t.Fatal(err)
			}
			if err := b.Unlock(ctx, "l"); err != nil {
				t.Fatal(err)
			}
			// A holder that died: its row stays, with a lease in the past.
			if _, err := a.db.ExecContext(ctx, a.bind(`INSERT INTO llm_records_lock (name, owner, expires) VALUES (?, ?, ?)`),
				"dead", "gone", time.Now().Add(-time.Second).UnixMilli()); err != nil {
				t.Fatal(err)
			}
			if err := b.Lock(ctx, "dead"); err != nil {
				t.Fatalf("an expired lock was not taken over: %v", err)
			}
			_ = b.Unlock(ctx, "dead")
		})
	}
}

// TestMigrateConcurrent: instances starting together on one database
// apply the schema once.
func TestMigrateConcurrent(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range databases(t) {
		t.Run(name, func(t *testing.T) {
			if name == "postgres" {
				dsn = sqlkvtest.PostgresDSN(t)
			}
			kvs := []*KV{open(t, name, dsn), open(t, name, dsn), open(t, name, dsn)}
			var wg sync.WaitGroup
			errs := make([]error, len(kvs))
			for i, kv := range kvs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = kv.Connect(ctx) }()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var rows int
			if err := kvs[0].db.QueryRowContext(ctx, "SELECT COUNT(*) FROM llm_records_schema").Scan(&rows); err != nil || rows != len(migrations) {
				t.Fatalf("schema rows = %d, %v; want %d", rows, err, len(migrations))
			}
			if v, err := kvs[1].SchemaVersion(ctx); err != nil || v != len(migrations) {
				t.Fatalf("version = %d, %v", v, err)
			}
		})
	}
}
