package kvstore

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// commandLog records the names of the commands a client sends.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd.Name())
		return next(ctx, cmd)
	}
}
func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.add(c.Name())
		}
		return next(ctx, cmds)
	}
}
func (l *commandLog) add(n string) {
	l.mu.Lock()
	l.names = append(l.names, n)
	l.mu.Unlock()
}
func (l *commandLog) reset() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.names
	l.names = nil
	return out
}

// newTestRedis returns a KV under a fresh root folder and the command log
// of its client; every key under the root is deleted when the test ends.
func newTestRedis(t *testing.T, ttl time.Duration) (*Redis, string, *commandLog, *redis.Client) {
	c := redistest.Client(t, 0)
	log := &commandLog{}
	c.AddHook(log)
	root := "llmgw:test:kv:" + uuid.NewString()
	t.Cleanup(func() {
		ctx := context.Background()
		for it := c.Scan(ctx, 0, root+"*", 1000).Iterator(); it.Next(ctx); {
			c.Del(ctx, it.Val())
		}
	})
	return NewRedis(c, ttl), root, log, c
}

func TestRedisIndexedList(t *testing.T) {
	ctx := context.Background()
	kv, root, log, _ := newTestRedis(t, 0)
	if _, err := kv.List(ctx, root+"/ws-a", false); err != nil { // the one backfill scan
		t.Fatal(err)
	}
	keys := []string{root + "/ws-a/f1.json", root + "/ws-a/f2.json", root + "/ws-a/parts/p1", root + "/ws-b/f3.json"}
	for _, k := range keys {
		if err := kv.Store(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		prefix    string
		recursive bool
		want      []string
	}{
		{root + "/ws-a", false, keys[:2]},
		{root + "/ws-a/", true, keys[:3]},
		{root, true, keys},
		{root, false, nil},
		{root + "/ws-c", false, nil},
	}
	log.reset()
	for _, tc := range tests {
		got, err := kv.List(ctx, tc.prefix, tc.recursive)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q, %v) = %v, want %v", tc.prefix, tc.recursive, got, tc.want)
		}
	}
	for _, n := range log.reset() {
		if n == "scan" || n == "keys" {
			t.Fatalf("List sent %s: it must read the index, not the keyspace", n)
		}
	}
	if err := kv.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := kv.List(ctx, root, true); len(got) != 3 || slices.Contains(got, keys[0]) {
		t.Fatalf("after Delete: %v", got)
	}
	if _, err := kv.Load(ctx, keys[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a deleted key: %v", err)
	}
}

// TestRedisIndexExpiry: with a TTL, index members leave with their keys,
// so an index stays the size of what it lists.
func TestRedisIndexExpiry(t *testing.T) {
	ctx := context.Background()
	kv, root, _, c := newTestRedis(t, time.Hour)
	now := time.Now()
	kv.now = func() time.Time { return now }
	if _, err := kv.List(ctx, root+"/ws", false); err != nil { // the one backfill scan
		t.Fatal(err)
	}
	for i := range 5 {
		if err := kv.Store(ctx, root+"/ws/r"+strconv.Itoa(i)+".json", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Hour) // the five have expired (as far as the index knows)
	if err := kv.Store(ctx, root+"/ws/new.json", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{root + "/ws" + indexChildren, root + "/ws" + indexAll, root + indexAll} {
		if n, _ := c.ZCard(ctx, set).Result(); n != 1 {
			t.Fatalf("%s holds %d members after the others expired, want 1", set, n)
		}
	}
	if got, _ := kv.List(ctx, root+"/ws", false); !slices.Equal(got, []string{root + "/ws/new.json"}) {
		t.Fatalf("List: %v", got)
	}
}

// TestRedisIndexBackfill: records stored before the indexes existed (a
// plain SET, as the previous adapter wrote) are found by the first List,
// with one SCAN of their top folder, which is never scanned again.
func TestRedisIndexBackfill(t *testing.T) {
	ctx := context.Background()
	kv, root, log, c := newTestRedis(t, 0)
	old := []string{root + "/ws/a.json", root + "/ws/b.json"}
	for _, k := range old {
		c.Set(ctx, k, "v", 0)
	}
	got, err := kv.List(ctx, root+"/ws", false)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, old) {
		t.Fatalf("first List: %v %v", got, err)
	}
	log.reset()
	if err := kv.Store(ctx, root+"/ws/c.json", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, _ := kv.List(ctx, root+"/ws", false); len(got) != 3 {
		t.Fatalf("second List: %v", got)
	}
	if got, _ := kv.List(ctx, root+"/other", false); len(got) != 0 { // another folder: no scan either
		t.Fatalf("other folder: %v", got)
	}
	if slices.Contains(log.reset(), "scan") {
		t.Fatal("the second List scanned again")
	}
}

// BenchmarkRedisList lists a workspace of 20 files beside 50,000 unrelated
// keys (cache entries, counters): the index reads 20 members whatever the
// keyspace holds, where a SCAN walked all of it.
func BenchmarkRedisList(b *testing.B) {
	c := redistest.Client(b, 0)
	root := "llmgw:test:kvbench:" + uuid.NewString()
	ctx := context.Background()
	b.Cleanup(func() {
		for it := c.Scan(ctx, 0, root+"*", 1000).Iterator(); it.Next(ctx); {
			c.Del(ctx, it.Val())
		}
	})
	kv := NewRedis(c, 0)
	for i := range 20 {
		_ = kv.Store(ctx, root+"/files/ws/f"+strconv.Itoa(i)+".json", []byte("v"))
	}
	for i := 0; i < 50000; i += 1000 {
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < i+1000; j++ {
				p.Set(ctx, root+":cache:"+strconv.Itoa(j), "x", time.Hour)
			}
			return nil
		})
	}
	if _, err := kv.List(ctx, root+"/files/ws", false); err != nil { // the one backfill scan
		b.Fatal(err)
	}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if got, err := kv.List(ctx, root+"/files/ws", false); err != nil || len(got) != 20 {
				b.Fatal(len(got), err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for it := c.Scan(ctx, 0, root+"/files/ws/*", 1000).Iterator(); it.Next(ctx); {
				if !isIndexKey(it.Val()) {
					n++
				}
			}
			if n != 20 {
				b.Fatal(n)
			}
		}
	})
}

// TestRedisPrefix: with a prefix every key, index and marker in Redis
// starts with it, and the caller sees its own names.
func TestRedisPrefix(t *testing.T) {
	ctx := context.Background()
	base, root, _, c := newTestRedis(t, 0)
	kv := base.WithPrefix(root + "-fleet:")
	if err := kv.Store(ctx, "llm/x/a.json", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := kv.List(ctx, "llm/x", false); err != nil || !slices.Equal(got, []string{"llm/x/a.json"}) {
		t.Fatalf("List: %v %v", got, err)
	}
	if b, err := kv.Load(ctx, "llm/x/a.json"); err != nil || string(b) != "v" {
		t.Fatalf("Load: %q %v", b, err)
	}
	keys, _ := c.Keys(ctx, root+"*").Result()
	if len(keys) < 4 {
		t.Fatalf("keys in Redis: %v", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, root+"-fleet:llm") {
			t.Fatalf("key %q is not under the prefix", k)
		}
	}
	if err := kv.Delete(ctx, "llm/x/a.json"); err != nil {
		t.Fatal(err)
	}
	if got, _ := kv.List(ctx, "llm/x", false); len(got) != 0 {
		t.Fatalf("after Delete: %v", got)
	}
}
