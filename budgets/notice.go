package budgets

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Change notices. A usage limit is enforced by every instance, each from
// its own copy of the set (Store.Active); an instance that learnt of a
// new limit only at its next reload let a burst through meanwhile (a
// limit created on one instance, a burst of 50 on an idle other 2.5 s
// later: 2 of 3 bursts overspent). So a write to the store bumps a
// version and publishes a notice; every instance's Watch reloads its set
// on the notice and then acknowledges it; and the write returns only
// once every instance that received the notice has acknowledged it (or
// after NoticeWait). A limit created, changed or deleted through the API
// is therefore in force on every listening instance when the API
// answers. An instance whose subscription was down misses the notice: it
// checks the version (one GET) before serving a request once its set is
// older than refreshEvery, every request arriving meanwhile waiting for
// that check instead of being served the old set.

// NoticeWait bounds how long a write waits for the other instances to
// acknowledge its notice: the staleness bound (refreshEvery) applies to
// an instance that does not answer in that time.
const NoticeWait = 3 * time.Second

// ackTTL is how long an acknowledgement count is kept.
const ackTTL = 30 * time.Second

// Notifier announces changes of the stored limits to every instance and
// reports the version of the set, so a copy can be checked cheaply.
type Notifier interface {
	// Version returns the set's version ("" before the first write).
	Version(ctx context.Context) (string, error)
	// Announce bumps the version and tells every instance the limits
	// changed; it returns once each instance that received the notice
	// has reloaded (acknowledged it), when ctx ends, or after NoticeWait.
	Announce(ctx context.Context) error
}

// RedisNotice is the Notifier of a store kept in Redis: a version key,
// a pub/sub channel and acknowledgement counters, under prefix.
type RedisNotice struct {
	client  redis.UniversalClient
	version string
	channel string
	acks    string
}

// NewRedisNotice returns the notifier of limits kept in client under the
// key prefix prefix (the llm app's key_prefix).
func NewRedisNotice(client redis.UniversalClient, prefix string) *RedisNotice {
	base := prefix + storePrefix
	return &RedisNotice{client: client, version: base + ":version", channel: base + ":changed", acks: base + ":ack:"}
}

// Version implements Notifier.
func (n *RedisNotice) Version(ctx context.Context) (string, error) {
	v, err := n.client.Get(ctx, n.version).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// Announce implements Notifier. PUBLISH answers how many subscribers
// received the notice (on Redis Cluster, those of the node that took it:
// the wait may then end before every instance reloaded, and the version
// check covers the rest).
func (n *RedisNotice) Announce(ctx context.Context) error {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if err := n.client.Incr(ctx, n.version).Err(); err != nil {
		return err
	}
	heard, err := n.client.Publish(ctx, n.channel, id).Result()
	if err != nil || heard == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, NoticeWait)
	defer cancel()
	pause := time.Millisecond
	for {
		acked, err := n.client.Get(ctx, n.acks+id).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			if ctx.Err() != nil {
				return nil // waited long enough: the version check covers the rest
			}
			return err
		}
		if acked >= heard {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Watch reloads s on every notice until ctx ends and then acknowledges
// the notice, so the writer knows this instance enforces the new set. It
// also makes s check its set whenever the subscription is (re)made,
// since notices sent while it was down are lost. onNotice, when set, is
// called after each reload (tests wait on it).
func (n *RedisNotice) Watch(ctx context.Context, s *Store, onNotice func()) {
	for ctx.Err() == nil {
		sub := n.client.Subscribe(ctx, n.channel)
		if _, err := sub.Receive(ctx); err == nil {
			s.invalidate()
			ch := sub.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
		drain:
			for {
				select {
				case <-ctx.Done():
					break drain
				case msg, ok := <-ch:
					if !ok {
						break drain
					}
					// The reload is what the writer waits for: it must
					// have the new set before the notice is answered.
					_, _ = s.load(ctx)
					key := n.acks + msg.Payload
					pipe := n.client.Pipeline()
					pipe.Incr(ctx, key)
					pipe.Expire(ctx, key, ackTTL)
					_, _ = pipe.Exec(ctx)
					if onNotice != nil {
						onNotice()
					}
				}
			}
		}
		_ = sub.Close()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
