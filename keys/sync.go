package keys

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// Change propagation. Every write bumps a change counter in the KV (an
// INCR in Redis, a locked read-modify-write in Caddy's storage) and, with
// Redis, publishes "<counter> <kind>/<id>". Each instance applies a
// message whose counter follows the one it has; a gap (a lost message, a
// write while it was starting) or a counter read by the poll that is ahead
// of it makes it reload everything. So a change is seen as soon as it is
// published, and within one Poll interval when a message is lost or there
// is no Redis.

func (s *Store) versionKey() string { return s.prefix + "/version" }
func (s *Store) channel() string    { return s.prefix + "/changes" }

// readVersion returns the change counter (0 before any change).
func (s *Store) readVersion(ctx context.Context) (int64, error) {
	if s.opts.Redis != nil {
		n, err := s.opts.Redis.Get(ctx, s.versionKey()).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return n, err
	}
	b, err := s.opts.KV.Load(ctx, s.versionKey())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// bump increments the change counter and returns it.
func (s *Store) bump(ctx context.Context) (int64, error) {
	if s.opts.Redis != nil {
		return s.opts.Redis.Incr(ctx, s.versionKey()).Result()
	}
	lockName := strings.ReplaceAll(s.prefix, "/", "_") + "_version"
	if l, ok := s.opts.KV.(kvstore.Locker); ok {
		if err := l.Lock(ctx, lockName); err != nil {
			return 0, err
		}
		defer func() { _ = l.Unlock(context.WithoutCancel(ctx), lockName) }()
	}
	n, err := s.readVersion(ctx)
	if err != nil {
		return 0, err
	}
	n++
	return n, s.opts.KV.Store(ctx, s.versionKey(), []byte(strconv.FormatInt(n, 10)))
}

// announce tells other instances about a change this one made and has
// applied. A failure is logged: the write is stored, and other instances
// see it when they next reload (the poll retries reading the counter).
func (s *Store) announce(ctx context.Context, kind, id string) {
	ctx = context.WithoutCancel(ctx)
	n, err := s.bump(ctx)
	if err != nil {
		s.opts.Logger.Error("keys: announcing a change failed; other instances see it at their next reload", zap.Error(err))
		return
	}
	s.applied.CompareAndSwap(n-1, n)
	if s.opts.Redis != nil {
		if err := s.opts.Redis.Publish(ctx, s.channel(), strconv.FormatInt(n, 10)+" "+kind+"/"+id).Err(); err != nil {
			s.opts.Logger.Error("keys: publishing a change failed; other instances see it within the poll interval", zap.Error(err))
		}
	}
}

// Start follows other instances' changes until Stop.
func (s *Store) Start() {
	if s.stop != nil {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	var msgs <-chan *redis.Message
	var sub *redis.PubSub
	if s.opts.Redis != nil {
		sub = s.opts.Redis.Subscribe(context.Background(), s.channel())
		msgs = sub.Channel(redis.WithChannelSize(1024))
	}
	go func() {
		defer close(s.done)
		if sub != nil {
			defer sub.Close()
		}
		t := time.NewTicker(s.opts.Poll)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case m, ok := <-msgs:
				if !ok {
					msgs = nil
					continue
				}
				s.onMessage(m.Payload)
			case <-t.C:
				if !s.Ready() {
					s.retryInit()
					continue
				}
				s.poll()
			}
		}
	}()
}

// Stop ends Start's goroutine and waits for it.
func (s *Store) Stop() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop = nil
}

// Applied returns the change counter this instance's memory reflects.
func (s *Store) Applied() int64 { return s.applied.Load() }

func (s *Store) onMessage(payload string) {
	if !s.Ready() {
		return
	}
	nStr, ref, ok := strings.Cut(payload, " ")
	kind, id, ok2 := strings.Cut(ref, "/")
	n, err := strconv.ParseInt(nStr, 10, 64)
	if !ok || !ok2 || err != nil {
		return
	}
	applied := s.applied.Load()
	switch {
	case n <= applied:
		return
	case id == "*":
		// A bulk change (ImportAPIKeys): read everything again once.
		s.reloadAll()
		return
	case n == applied+1:
		if err := s.reloadOne(kind, id); err != nil {
			s.opts.Logger.Error("keys: applying a change failed; reloading", zap.Error(err))
			s.reloadAll()
			return
		}
		s.applied.CompareAndSwap(applied, n)
	default:
		s.reloadAll()
	}
}

// logEvery is the least interval between two of the sync loop's
// warnings about one condition: with a poll every second, a store away
// for an hour is 360 lines, not 3,600.
const logEvery = 10 * time.Second

func (s *Store) retryInit() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Init(ctx); err != nil {
		if ok, held := s.downLog.Allow(time.Now(), logEvery); ok {
			s.opts.Logger.Warn("keys: the record store is still unavailable; API keys are refused until it answers",
				zap.Error(err), zap.Int64("suppressed_since_last", held))
		}
		return
	}
	s.downLog.Reset()
	s.opts.Logger.Info("keys: the record store is available")
}

func (s *Store) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := s.readVersion(ctx)
	if err != nil {
		if ok, held := s.pollLog.Allow(time.Now(), logEvery); ok {
			s.opts.Logger.Warn("keys: reading the change counter failed", zap.Error(err), zap.Int64("suppressed_since_last", held))
		}
		return
	}
	s.pollLog.Reset()
	if n != s.applied.Load() {
		s.reloadAll()
	}
}

func (s *Store) reloadAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Load(ctx); err != nil {
		s.opts.Logger.Error("keys: reloading records failed; serving the previous ones", zap.Error(err))
	}
}

// reloadOne reads one record again and applies it (or its deletion).
func (s *Store) reloadOne(kind, id string) error {
	switch kind {
	case kindAPIKeys, kindVirtualKeys, kindConfigs, kindUsers:
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	data, err := s.opts.KV.Load(ctx, s.recordKey(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		s.mu.Lock()
		s.idx.drop(kind, id)
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(s.idx, kind, data, true)
}

// LoadOrCreateSecret returns the server secret kept in the KV under
// prefix, creating a random one the first time. Instances sharing the KV
// share it. An operator who gives the secret in the configuration instead
// keeps it out of the store, so a dump of the store does not even allow
// checking a guessed key.
func LoadOrCreateSecret(ctx context.Context, opts Options) ([]byte, error) {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "llm_gateway/keys"
	}
	name := strings.TrimSuffix(prefix, "/") + "/server_secret"
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return nil, err
	}
	enc := base64.StdEncoding.EncodeToString(fresh[:])
	if opts.Redis != nil {
		if err := opts.Redis.SetNX(ctx, name, enc, 0).Err(); err != nil {
			return nil, err
		}
		v, err := opts.Redis.Get(ctx, name).Result()
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.DecodeString(v)
	}
	if l, ok := opts.KV.(kvstore.Locker); ok {
		if err := l.Lock(ctx, "llm_gateway_keys_secret"); err != nil {
			return nil, err
		}
		defer func() { _ = l.Unlock(context.WithoutCancel(ctx), "llm_gateway_keys_secret") }()
	}
	b, err := opts.KV.Load(ctx, name)
	if err == nil {
		return base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := opts.KV.Store(ctx, name, []byte(enc)); err != nil {
		return nil, err
	}
	return fresh[:], nil
}
