// Package kvstore is the one record store shape of the gateway's
// control-plane records (files, batch records, stored responses): a
// key-value interface that Caddy's certmagic.Storage satisfies as it is,
// and a Redis adapter for gateways that share a Redis instead.
package kvstore

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// KV is the storage records live in. certmagic.Storage
// (what a Caddy module gets from ctx.Storage()) satisfies it; RedisKV
// adapts a Redis client. Load must return an error wrapping fs.ErrNotExist
// for a missing key; List returns full keys under prefix (recursive: at
// any depth, else direct children only) and may return fs.ErrNotExist
// for an empty prefix.
type KV interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
}

// Redis keeps records in Redis, for gateways that share a Redis instead
// of a Caddy storage module. With a TTL every key expires after it, so
// Redis itself drops old records; without one keys stay until deleted.
//
// Listing never scans the keyspace (which a shared Redis fills with cache
// entries and counters): every Store also adds the key to a sorted-set
// index of its folder ("<dir>/.index", direct children) and of each
// ancestor folder ("<ancestor>/.index-all", everything below), scored by
// the key's expiry (a far future without a TTL); Delete removes it, and
// List reads the set. Each write and list first drops the members whose
// expiry has passed, so an index never outgrows the live keys it lists
// plus one write's worth. Records written before the indexes existed are
// indexed by one SCAN under the top folder of the first List (the first
// path segment, such as "llm_gateway"), remembered by "<top>/.indexed", so
// a deployment upgraded in place scans once, and never again.
type Redis struct {
	client redis.UniversalClient
	ttl    time.Duration
	// prefix starts every key in Redis (WithPrefix); callers never see it.
	prefix string
	// now replaces time.Now in tests.
	now func() time.Time
}

// NewRedis returns a KV over client whose keys expire after ttl (0: never).
func NewRedis(client redis.UniversalClient, ttl time.Duration) *Redis {
	return &Redis{client: client, ttl: ttl, now: time.Now}
}

// WithPrefix returns a copy of r whose keys all start with prefix in
// Redis (the llm app's key_prefix, so several fleets share one Redis);
// callers keep using and seeing their own key names.
func (r *Redis) WithPrefix(prefix string) *Redis {
	c := *r
	c.prefix = prefix
	return &c
}

// noExpiry scores keys without a TTL: never dropped as expired.
const noExpiry = float64(1 << 62)

// score is the index score of a key written now.
func (r *Redis) score() float64 {
	if r.ttl <= 0 {
		return noExpiry
	}
	return float64(r.now().Add(r.ttl).UnixMilli())
}

// expired is the ZREMRANGEBYSCORE bound of the expired members.
func (r *Redis) expired() string { return strconv.FormatInt(r.now().UnixMilli(), 10) }

// Index key names: they start with a dot, which no record key's last
// segment does (records are ids with an extension), so they are never
// listed as records.
const (
	indexChildren = "/.index"
	indexAll      = "/.index-all"
	indexedMarker = "/.indexed"
)

// indexSets returns the index sets key belongs to: its folder's direct
// set and the recursive set of every ancestor folder.
func indexSets(key string) (direct string, all []string) {
	dir, ok := parentDir(key)
	if !ok {
		return "", nil
	}
	direct = dir + indexChildren
	for d, ok := dir, true; ok; d, ok = parentDir(d) {
		all = append(all, d+indexAll)
	}
	return direct, all
}

func parentDir(key string) (string, bool) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return "", false
	}
	return key[:i], true
}

// isIndexKey reports whether k is one of the index keys.
func isIndexKey(k string) bool {
	i := strings.LastIndexByte(k, '/')
	return strings.HasPrefix(k[i+1:], ".index")
}

// Store implements KV: the value and its index entries in one round trip.
func (r *Redis) Store(ctx context.Context, key string, value []byte) error {
	key = r.prefix + key
	direct, all := indexSets(key)
	z := redis.Z{Score: r.score(), Member: key}
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, value, r.ttl)
		r.indexCmds(ctx, p, direct, all, z)
		return nil
	})
	return err
}

// Load implements KV; a missing key wraps fs.ErrNotExist.
func (r *Redis) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := r.client.Get(ctx, r.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fs.ErrNotExist
	}
	return b, err
}

// Delete implements KV.
func (r *Redis) Delete(ctx context.Context, key string) error {
	key = r.prefix + key
	direct, all := indexSets(key)
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		for _, set := range append(all, direct) {
			if set != "" {
				p.ZRem(ctx, set, key)
			}
		}
		return nil
	})
	return err
}

// List implements KV from the folder's index set: its direct children,
// or everything below it when recursive.
func (r *Redis) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	dir := r.prefix + strings.TrimSuffix(prefix, "/")
	if err := r.backfill(ctx, dir); err != nil {
		return nil, err
	}
	set := dir + indexChildren
	if recursive {
		set = dir + indexAll
	}
	if r.ttl > 0 {
		if err := r.client.ZRemRangeByScore(ctx, set, "-inf", r.expired()).Err(); err != nil {
			return nil, err
		}
	}
	keys, err := r.client.ZRange(ctx, set, 0, -1).Result()
	if r.prefix != "" {
		for i, k := range keys {
			keys[i] = strings.TrimPrefix(k, r.prefix)
		}
	}
	return keys, err
}

// backfill indexes, once, the records stored under dir's top folder
// before the indexes existed, with one SCAN (on every primary of a Redis
// Cluster).
func (r *Redis) backfill(ctx context.Context, dir string) error {
	if i := strings.IndexByte(dir[len(r.prefix):], '/'); i > 0 {
		dir = dir[:len(r.prefix)+i]
	}
	marker := dir + indexedMarker
	n, err := r.client.Exists(ctx, marker).Result()
	if err != nil || n > 0 {
		return err
	}
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		it := c.Scan(ctx, 0, escapeGlob(dir+"/")+"*", 1000).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			if isIndexKey(k) {
				continue
			}
			direct, all := indexSets(k)
			z := redis.Z{Score: r.score(), Member: k}
			if _, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, set := range append(all, direct) {
					p.ZAdd(ctx, set, z)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return it.Err()
	}
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.client)
	}
	if err != nil {
		return err
	}
	return r.client.Set(ctx, marker, "1", 0).Err()
}

// escapeGlob quotes Redis glob metacharacters in a literal prefix.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// listAttempts bounds ListKeys' retries.
const listAttempts = 10

// ListKeys lists keys under prefix, treating a missing prefix as empty.
// Caddy's file storage walks the folder, and a temporary file of a
// concurrent atomic write that vanishes mid-walk ends the walk with
// fs.ErrNotExist and a partial list; ListKeys tells that apart from a
// missing prefix (with the storage's Exists) and lists again.
func ListKeys(ctx context.Context, kv KV, prefix string, recursive bool) ([]string, error) {
	type exister interface {
		Exists(ctx context.Context, key string) bool
	}
	for i := 0; ; i++ {
		keys, err := kv.List(ctx, prefix, recursive)
		if err == nil {
			return keys, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		ex, ok := kv.(exister)
		if !ok || !ex.Exists(ctx, prefix) {
			return keys, nil
		}
		if i+1 == listAttempts {
			return nil, err
		}
	}
}

// claimScript takes a lease: free, or already the caller's, it is set to
// the owner for the TTL (renewed); held by another owner, it is refused.
var claimScript = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
if v == false or v == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
return 0`)

// releaseScript drops a lease only when the caller holds it.
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)

// Claim takes or renews the lease key for owner for ttl; false when
// another owner holds it. A lease is a plain key with an expiry, outside
// the folder indexes.
func (r *Redis) Claim(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	n, err := claimScript.Run(ctx, r.client, []string{r.prefix + key}, owner, ttl.Milliseconds()).Int64()
	return n == 1, err
}

// Release drops the lease key if owner holds it.
func (r *Redis) Release(ctx context.Context, key, owner string) error {
	return releaseScript.Run(ctx, r.client, []string{r.prefix + key}, owner).Err()
}

// Scanner is a KV that reads a folder's records with their values in one
// pass (a SQL store: one query instead of a List and one Load per
// record). A store that reads every record at start uses it when its KV
// has it: at 1,000,000 records the round trips are most of the time.
type Scanner interface {
	// Scan calls fn with each record under prefix (direct children only,
	// as List without recursive), in key order, and stops at fn's first
	// error, which it returns.
	Scan(ctx context.Context, prefix string, fn func(key string, value []byte) error) error
}
