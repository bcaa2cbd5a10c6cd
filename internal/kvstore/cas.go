package kvstore

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io/fs"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Swapper is a KV that compares and swaps one key atomically for every
// process sharing it (Redis runs the comparison and the write as one
// script).
type Swapper interface {
	CompareAndSwap(ctx context.Context, key string, old, value []byte) (bool, error)
}

// Locker is the part of certmagic.Storage that serialises writers across
// the processes sharing a storage: Caddy's file storage locks with a
// lock file in the storage folder, so a lock holds across processes on
// one directory, and a distributed storage module (Redis, Consul, a
// database) with its own distributed lock.
type Locker interface {
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// CompareAndSwap stores value under key only when what is stored is still
// old, byte for byte (nil old: only when nothing is stored), and reports
// whether it did. A record read, changed and written back with it is never
// written over a change another instance made in between: that write
// reports false and its caller starts again from the new value or refuses.
//
// It is atomic across processes with a Swapper (Redis), or under the
// storage's Lock for a Locker (every certmagic.Storage), named after the
// key. A KV with neither (an in-memory test map) is compared and stored in
// two steps, which is atomic only among writers that serialise themselves.
func CompareAndSwap(ctx context.Context, kv KV, key string, old, value []byte) (bool, error) {
	if s, ok := kv.(Swapper); ok {
		return s.CompareAndSwap(ctx, key, old, value)
	}
	if l, ok := kv.(Locker); ok {
		name := "cas_" + strings.ReplaceAll(key, "/", "_")
		if err := l.Lock(ctx, name); err != nil {
			return false, err
		}
		defer func() { _ = l.Unlock(context.WithoutCancel(ctx), name) }()
	}
	cur, err := kv.Load(ctx, key)
	absent := errors.Is(err, fs.ErrNotExist)
	if err != nil && !absent {
		return false, err
	}
	if absent != (old == nil) || !bytes.Equal(cur, old) {
		return false, nil
	}
	return true, kv.Store(ctx, key, value)
}

// swapScript sets KEYS[1] to ARGV[2] (expiring after ARGV[3] ms when
// positive) when its value's SHA-1 is ARGV[1], or, with ARGV[1] empty,
// when it does not exist. The digest stands for the old value so a large
// record is not sent twice; SHA-1 only tells two versions of one record
// apart here, which no one chooses.
var swapScript = redis.NewScript(`
local cur = redis.call("GET", KEYS[1])
if ARGV[1] == "" then
  if cur then return 0 end
elseif not cur or redis.sha1hex(cur) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[3]) > 0 then
  redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
else
  redis.call("SET", KEYS[1], ARGV[2])
end
return 1`)

// CompareAndSwap implements Swapper: one script on the record's key
// (under the prefix), so it runs on Redis Cluster too. The key's index
// entries are added first, in their own round trip (they live in other
// hash slots): an entry whose swap then fails names a key that exists or
// that Load reports missing, and List's callers skip those.
func (r *Redis) CompareAndSwap(ctx context.Context, key string, old, value []byte) (bool, error) {
	if err := r.addIndex(ctx, r.prefix+key); err != nil {
		return false, err
	}
	sum := ""
	if old != nil {
		h := sha1.Sum(old)
		sum = hex.EncodeToString(h[:])
	}
	n, err := swapScript.Run(ctx, r.client, []string{r.prefix + key}, sum, value, r.ttl.Milliseconds()).Int64()
	return n == 1, err
}

// addIndex adds key (prefixed) to its folder indexes, dropping expired
// members first.
func (r *Redis) addIndex(ctx context.Context, key string) error {
	direct, all := indexSets(key)
	z := redis.Z{Score: r.score(), Member: key}
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		r.indexCmds(ctx, p, direct, all, z)
		return nil
	})
	return err
}

// indexCmds queues the index updates of one write on p.
func (r *Redis) indexCmds(ctx context.Context, p redis.Pipeliner, direct string, all []string, z redis.Z) {
	for _, set := range append(all, direct) {
		if set == "" {
			continue
		}
		if r.ttl > 0 {
			p.ZRemRangeByScore(ctx, set, "-inf", r.expired())
		}
		p.ZAdd(ctx, set, z)
	}
}
