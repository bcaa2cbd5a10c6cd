package files

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// flakyKV is a KV that fails every call while down is set, as a Redis
// that stopped answering does.
type flakyKV struct {
	KV
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (f *flakyKV) Store(ctx context.Context, k string, v []byte) error {
	if f.down.Load() {
		return errDown
	}
	return f.KV.Store(ctx, k, v)
}
func (f *flakyKV) Load(ctx context.Context, k string) ([]byte, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.KV.Load(ctx, k)
}
func (f *flakyKV) Delete(ctx context.Context, k string) error {
	if f.down.Load() {
		return errDown
	}
	return f.KV.Delete(ctx, k)
}
func (f *flakyKV) List(ctx context.Context, p string, rec bool) ([]string, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.KV.List(ctx, p, rec)
}

// unreachableRedis is a client of a port nothing listens on.
func unreachableRedis(t *testing.T) KV {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return NewRedisKV(c)
}

// TestStoreFaultIs503: every files call made while the store fails
// answers 503 file_store_unavailable in the envelope, never a 400 that
// blames the client nor a 500, and never the store's own error text.
func TestStoreFaultIs503(t *testing.T) {
	kv := &flakyKV{KV: &certmagic.FileStorage{Path: t.TempDir()}}
	s := NewStore(kv, Config{})
	w := upload(t, s, "ws", "batch", "in.jsonl", []byte("line\n"))
	if w.Code != 200 {
		t.Fatalf("upload while up: %d %s", w.Code, w.Body)
	}
	var f File
	_ = json.Unmarshal(w.Body.Bytes(), &f)
	kv.down.Store(true)
	unreachable := NewStore(unreachableRedis(t), Config{})
	tests := []struct {
		name string
		call func() (int, string)
	}{
		{"upload, redis unreachable", func() (int, string) {
			w := upload(t, unreachable, "ws", "batch", "in.jsonl", []byte("line\n"))
			return w.Code, w.Body.String()
		}},
		{"list, redis unreachable", func() (int, string) {
			w := do(t, unreachable, "ws", "GET", "/v1/files")
			return w.Code, w.Body.String()
		}},
		{"upload", func() (int, string) {
			w := upload(t, s, "ws", "batch", "b.jsonl", []byte("x\n"))
			return w.Code, w.Body.String()
		}},
		{"list", func() (int, string) { w := do(t, s, "ws", "GET", "/v1/files"); return w.Code, w.Body.String() }},
		{"retrieve", func() (int, string) { w := do(t, s, "ws", "GET", "/v1/files/"+f.ID); return w.Code, w.Body.String() }},
		{"content", func() (int, string) {
			w := do(t, s, "ws", "GET", "/v1/files/"+f.ID+"/content")
			return w.Code, w.Body.String()
		}},
		{"delete", func() (int, string) { w := do(t, s, "ws", "DELETE", "/v1/files/"+f.ID); return w.Code, w.Body.String() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := tc.call()
			if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"file_store_unavailable"`) ||
				!strings.Contains(body, "file store") {
				t.Fatalf("%d %s", code, body)
			}
			if strings.Contains(body, "refused") || strings.Contains(body, "127.0.0.1") {
				t.Fatalf("the store's error reached the client: %s", body)
			}
		})
	}
	// The store's methods return the fault as a *StoreError, not an
	// apierror, so the batch engine retries it (a 404 or 413 apierror is
	// permanent there).
	for name, call := range map[string]func() error{
		"Get":    func() error { _, err := s.Get(context.Background(), "ws", f.ID); return err },
		"Chunks": func() error { _, _, err := s.Chunks(context.Background(), "ws", f.ID); return err },
		"Chunk":  func() error { _, err := s.Chunk(context.Background(), "ws", f.ID, 0); return err },
		"CreateFrom": func() error {
			_, err := s.CreateFrom(context.Background(), "ws", "o", PurposeBatchOutput, strings.NewReader("x"))
			return err
		},
	} {
		err := call()
		var se *StoreError
		var ae *apierror.Error
		if !errors.As(err, &se) || errors.As(err, &ae) {
			t.Errorf("%s: %T %v, want a *StoreError", name, err, err)
		}
	}
	// Back up, the file is whole.
	kv.down.Store(false)
	if w := do(t, s, "ws", "GET", "/v1/files/"+f.ID+"/content"); w.Code != 200 || w.Body.String() != "line\n" {
		t.Fatalf("after the outage: %d %s", w.Code, w.Body)
	}
}
