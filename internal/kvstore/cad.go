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

// CompareDeleter is a KV that deletes one key only while its value is
// still a given one, atomically for every process sharing it (Redis runs
// the comparison and the delete as one script). It is optional beside
// KV, as Swapper is.
type CompareDeleter interface {
	CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error)
}

// CompareAndDelete deletes key only when what is stored is still old,
// byte for byte, and reports whether it did (false also when nothing is
// stored): a delete made on condition of a version (If-Match) never
// deletes a record another instance changed in between. It is atomic in
// the same ways as CompareAndSwap: a CompareDeleter's own, under the
// storage's Lock (named as CompareAndSwap names it, so the two exclude
// each other), or in two steps for a KV with neither.
func CompareAndDelete(ctx context.Context, kv KV, key string, old []byte) (bool, error) {
	if d, ok := kv.(CompareDeleter); ok {
		return d.CompareAndDelete(ctx, key, old)
	}
	if l, ok := kv.(Locker); ok {
		name := "cas_" + strings.ReplaceAll(key, "/", "_")
		if err := l.Lock(ctx, name); err != nil {
			return false, err
		}
		defer func() { _ = l.Unlock(context.WithoutCancel(ctx), name) }()
	}
	cur, err := kv.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !bytes.Equal(cur, old) {
		return false, nil
	}
	return true, kv.Delete(ctx, key)
}

// deleteScript deletes KEYS[1] when its value's SHA-1 is ARGV[1].
var deleteScript = redis.NewScript(`
local cur = redis.call("GET", KEYS[1])
if not cur or redis.sha1hex(cur) ~= ARGV[1] then
  return 0
end
redis.call("DEL", KEYS[1])
return 1`)

// CompareAndDelete implements CompareDeleter: one script on the record's
// key, then its index entries are dropped (another round trip: they live
// in other hash slots; an entry left by a failure names a key Load
// reports missing, which List's callers skip).
func (r *Redis) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	h := sha1.Sum(old)
	n, err := deleteScript.Run(ctx, r.client, []string{r.prefix + key}, hex.EncodeToString(h[:])).Int64()
	if err != nil || n != 1 {
		return false, err
	}
	return true, r.Delete(ctx, key)
}
