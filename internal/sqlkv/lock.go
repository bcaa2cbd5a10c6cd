package sqlkv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Lock timing. A lock is a row naming its owner and when it expires; the
// holder renews it every lockRenew, so only a holder that died (a killed
// process) lets it expire, and the others wait at most lockTTL for it.
// A waiter tries again every lockPoll: the locks guard single record
// writes (a change counter, a secret, a prompt's Mutate), held for a few
// milliseconds.
const (
	lockTTL   = 10 * time.Second
	lockRenew = 3 * time.Second
	lockPoll  = 10 * time.Millisecond
)

// heldLock is a lock this process holds.
type heldLock struct {
	owner string
	stop  chan struct{}
	done  chan struct{}
}

// Lock implements certmagic.Locker across every process sharing the
// database: it takes the row of name when it is free or expired, and
// waits for it otherwise (until ctx ends).
func (kv *KV) Lock(ctx context.Context, name string) error {
	if err := kv.Connect(ctx); err != nil {
		return err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	owner := hex.EncodeToString(b[:])
	for {
		ok, err := kv.tryLock(ctx, name, owner)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sqlkv: waiting for lock %s: %w", name, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	h := &heldLock{owner: owner, stop: make(chan struct{}), done: make(chan struct{})}
	kv.locksMu.Lock()
	kv.locks[name] = h
	kv.locksMu.Unlock()
	go kv.renew(name, h)
	return nil
}

// tryLock takes name for owner when no one holds it or its holder's
// lease has expired.
func (kv *KV) tryLock(ctx context.Context, name, owner string) (bool, error) {
	now := kv.now()
	res, err := kv.db.ExecContext(ctx, kv.bind(`INSERT INTO llm_records_lock (name, owner, expires) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
		WHERE llm_records_lock.expires < ?`), name, owner, now.Add(lockTTL).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// renew extends a held lock until Unlock.
func (kv *KV) renew(name string, h *heldLock) {
	defer close(h.done)
	t := time.NewTicker(lockRenew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), lockRenew)
			_, _ = kv.db.ExecContext(ctx, kv.bind(`UPDATE llm_records_lock SET expires = ? WHERE name = ? AND owner = ?`),
				kv.now().Add(lockTTL).UnixMilli(), name, h.owner)
			cancel()
		}
	}
}

// Unlock implements certmagic.Locker: it releases a lock this process
// holds.
func (kv *KV) Unlock(ctx context.Context, name string) error {
	kv.locksMu.Lock()
	h, ok := kv.locks[name]
	delete(kv.locks, name)
	kv.locksMu.Unlock()
	if !ok {
		return fmt.Errorf("sqlkv: lock %s is not held", name)
	}
	close(h.stop)
	<-h.done
	_, err := kv.db.ExecContext(ctx, kv.bind(`DELETE FROM llm_records_lock WHERE name = ? AND owner = ?`), name, h.owner)
	return err
}
