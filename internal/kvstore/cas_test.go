package kvstore

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"
)

// casBackends are the KVs CompareAndSwap must be atomic on, each given
// as two handles (two instances) over one store: Redis under a key
// prefix through two clients, and Caddy's file storage on one folder.
func casBackends(t *testing.T) map[string][2]KV {
	kv1, root, _, _ := newTestRedis(t, time.Hour)
	kv2, _, _, _ := newTestRedis(t, time.Hour)
	prefix := root + ":"
	dir := t.TempDir()
	return map[string][2]KV{
		"redis": {kv1.WithPrefix(prefix), kv2.WithPrefix(prefix)},
		"file":  {&certmagic.FileStorage{Path: dir}, &certmagic.FileStorage{Path: dir}},
	}
}

// TestCompareAndSwap: a write from a stale value is refused, a write
// from the stored one succeeds, and a nil old creates only.
func TestCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	for name, kvs := range casBackends(t) {
		t.Run(name, func(t *testing.T) {
			kv := kvs[0]
			key := "llm_gateway/cas/" + uuid.NewString() + ".json"
			steps := []struct {
				old, value string
				absent     bool // old is nil
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
				ok, err := CompareAndSwap(ctx, kv, key, old, []byte(s.value))
				if err != nil || ok != s.want {
					t.Fatalf("step %d: swap = %v, %v; want %v", i, ok, err, s.want)
				}
				got, err := kvs[1].Load(ctx, key)
				if err != nil || string(got) != s.stored {
					t.Fatalf("step %d: stored %q, %v; want %q", i, got, err, s.stored)
				}
			}
			if name == "redis" {
				keys, err := ListKeys(ctx, kv, "llm_gateway/cas", false)
				if err != nil || len(keys) != 1 || keys[0] != key {
					t.Fatalf("the swapped key is not listed: %v %v", keys, err)
				}
			}
		})
	}
}

// TestCompareAndSwapConcurrent: increments read, changed and swapped by
// many writers on two instances at once lose none, which plain Load and
// Store (last writer wins) do.
func TestCompareAndSwapConcurrent(t *testing.T) {
	ctx := context.Background()
	for name, kvs := range casBackends(t) {
		t.Run(name, func(t *testing.T) {
			// File locks poll every second when contended: fewer writers.
			writers := 40
			if name == "file" {
				writers = 6
			}
			key := "llm_gateway/cas/" + uuid.NewString() + ".json"
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for i := range writers {
				wg.Add(1)
				go func(kv KV) {
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
						ok, err := CompareAndSwap(ctx, kv, key, old, []byte(strconv.Itoa(n+1)))
						if err != nil {
							errs <- err
							return
						}
						if ok {
							return
						}
					}
				}(kvs[i%2])
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got, _ := kvs[0].Load(ctx, key)
			if string(got) != strconv.Itoa(writers) {
				t.Fatalf("%d increments stored %s", writers, got)
			}
		})
	}
}
