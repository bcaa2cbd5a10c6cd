package integration

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// casPair is two gateways whose records live in one Redis: this
// process's Caddy and the gateway binary as a subprocess, each with its
// own ports and storage, under a key prefix of the test's own.
type casPair struct {
	bases  [2]string
	rc     *redis.Client
	prefix string
}

func startCASPair(t *testing.T) *casPair {
	t.Helper()
	rc := redistest.Client(t, 0)
	bin := buildGateway(t)
	up := newFakeOpenAI(t)
	prefix := "llmgw-cas-" + uuid.NewString()[:8] + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		for it := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
			rc.Del(ctx, it.Val())
		}
	})
	s := newKeysSite(t, vkOpenAI("openai", up.URL)+fmt.Sprintf("redis %s {\n\t\t\tkey_prefix %s\n\t\t}\n\t\t", redistest.Addr(), prefix))
	cf := s.caddyfile()
	port2, dir := freePort(), t.TempDir()
	for _, r := range [][2]string{
		{fmt.Sprintf("admin localhost:%d", adminPort), fmt.Sprintf("admin localhost:%d", freePort())},
		{"output file " + logPath, "output file " + filepath.Join(dir, "second.log")},
		{fmt.Sprintf(":%d {", httpPort), fmt.Sprintf(":%d {", port2)},
		{s.Storage, filepath.Join(dir, "storage")},
	} {
		if !strings.Contains(cf, r[0]) {
			t.Fatalf("the Caddyfile has no %q", r[0])
		}
		cf = strings.Replace(cf, r[0], r[1], 1)
	}
	startGateway(t, bin, dir, cf, port2)
	s.load(t)
	return &casPair{bases: [2]string{gatewayURL(), fmt.Sprintf("http://127.0.0.1:%d/v1", port2)}, rc: rc, prefix: prefix}
}

// send calls instance i as key and returns the status and body.
func (p *casPair) send(t *testing.T, i int, key, method, path, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.bases[i]+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-gateway-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	for j := 0; j+1 < len(headers); j += 2 {
		req.Header.Set(headers[j], headers[j+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on instance %d: %v", method, path, i, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// must is send that fails the test unless the status is want.
func (p *casPair) must(t *testing.T, i int, key, method, path, body string, want int, out any, headers ...string) []byte {
	t.Helper()
	code, raw := p.send(t, i, key, method, path, body, headers...)
	if code != want {
		t.Fatalf("%s %s on instance %d: %d, want %d: %s", method, path, i, code, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// record reads an API key's stored record from Redis.
func (p *casPair) record(t *testing.T, id string) *keys.APIKey {
	t.Helper()
	raw, err := p.rc.Get(context.Background(), p.prefix+"llm_gateway/keys/api_keys/"+id+".json").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	r := new(keys.APIKey)
	if err := json.Unmarshal(raw, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitKnown waits until instance i serves key (its change feed may lag
// the write by a message).
func (p *casPair) waitKnown(t *testing.T, i int, id string) {
	t.Helper()
	for n := 0; ; n++ {
		if code, _ := p.send(t, i, keysAdminKey, "GET", "/api-keys/"+id, ""); code == 200 {
			return
		}
		if n == 500 {
			t.Fatalf("instance %d never saw key %s", i, id)
		}
		waitABit()
	}
}

// TestHardening4CASAcrossInstances: two gateways on one Redis.
//   - A revocation on one instance and an edit of the same key on the
//     other, at once, 30 times: every answered revocation stands (the key
//     is revoked in the store and refused by both instances); the edit
//     either lands first or is refused (409 version_conflict or
//     api_key_revoked). Before, the edit wrote the key back active 4-7
//     times in 30.
//   - One Idempotency-Key sent to both instances at once rotates once:
//     both answers are identical and the key they carry works.
//   - The same Idempotency-Key with another body: 422
//     idempotency_key_reused, and nothing rotates.
//   - The stored replay box does not open from the record id and the
//     Idempotency-Key alone.
//   - A provider key in a config saved through the API is in no Redis
//     value, and the other instance routes with it.
func TestHardening4CASAcrossInstances(t *testing.T) {
	p := startCASPair(t)
	create := func(t *testing.T, name string) (id, key string) {
		t.Helper()
		var k createdKey
		p.must(t, 0, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"`+name+`","scopes":["completions.write"],"defaults":{"virtual_key":"openai"}}`, 200, &k)
		p.waitKnown(t, 1, k.ID)
		return k.ID, k.Key
	}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

	t.Run("revoke racing edit", func(t *testing.T) {
		const pairs = 30
		resurrected, refused := 0, 0
		for i := range pairs {
			id, key := create(t, fmt.Sprintf("race-%d", i))
			var wg sync.WaitGroup
			start := make(chan struct{})
			var codes [2]int
			var bodies [2][]byte
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				codes[0], bodies[0] = p.send(t, 0, keysAdminKey, "DELETE", "/api-keys/"+id, "")
			}()
			go func() {
				defer wg.Done()
				<-start
				codes[1], bodies[1] = p.send(t, 1, keysAdminKey, "PUT", "/api-keys/"+id, fmt.Sprintf(`{"name":"edited-%d","description":"d"}`, i))
			}()
			close(start)
			wg.Wait()
			if codes[0] != 200 {
				t.Fatalf("pair %d: revoke answered %d: %s", i, codes[0], bodies[0])
			}
			switch codes[1] {
			case 200:
			case 409:
				if c := errCode(t, bodies[1]); c != "version_conflict" && c != "api_key_revoked" {
					t.Fatalf("pair %d: edit refused with %s", i, bodies[1])
				}
				refused++
			default:
				t.Fatalf("pair %d: edit answered %d: %s", i, codes[1], bodies[1])
			}
			if p.record(t, id).Status != keys.StatusRevoked {
				resurrected++
				continue
			}
			for inst := range 2 {
				for n := 0; ; n++ {
					code, raw := p.send(t, inst, key, "POST", "/chat/completions", chat)
					if code == 401 && errCode(t, raw) == "api_key_revoked" {
						break
					}
					if n == 500 {
						t.Fatalf("pair %d: instance %d still serves the revoked key: %d %s", i, inst, code, raw)
					}
					waitABit()
				}
			}
		}
		if resurrected > 0 {
			t.Fatalf("%d of %d answered revocations were undone by a concurrent edit on the other instance", resurrected, pairs)
		}
		t.Logf("%d pairs: 0 resurrections; %d edits refused, %d landed first", pairs, refused, pairs-refused)
	})

	t.Run("one Idempotency-Key on both instances", func(t *testing.T) {
		for i := range 10 {
			id, _ := create(t, fmt.Sprintf("rotate-%d", i))
			idem := uuid.NewString()
			body := `{"key_transition_period_ms":60000}`
			var wg sync.WaitGroup
			start := make(chan struct{})
			var raws [2][]byte
			for inst := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					var code int
					code, raws[inst] = p.send(t, inst, keysAdminKey, "POST", "/api-keys/"+id+"/rotate", body, "Idempotency-Key", idem)
					if code != 200 {
						t.Errorf("instance %d: %d %s", inst, code, raws[inst])
					}
				}()
			}
			close(start)
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			if string(raws[0]) != string(raws[1]) {
				t.Fatalf("try %d: two answers:\n%s\n%s", i, raws[0], raws[1])
			}
			var got struct{ Key string }
			_ = json.Unmarshal(raws[0], &got)
			rec := p.record(t, id)
			if rec.Version != 2 {
				t.Fatalf("try %d: the key was written %d times", i, rec.Version-1)
			}
			for inst := range 2 {
				for n := 0; ; n++ {
					code, raw := p.send(t, inst, got.Key, "POST", "/chat/completions", chat)
					if code == 200 {
						break
					}
					if n == 500 {
						t.Fatalf("try %d: the answered key does not work on instance %d: %d %s", i, inst, code, raw)
					}
					waitABit()
				}
			}

			// The same Idempotency-Key with another body.
			raw := p.must(t, 1, keysAdminKey, "POST", "/api-keys/"+id+"/rotate", `{"key_transition_period_ms":5}`, 422, nil, "Idempotency-Key", idem)
			if errCode(t, raw) != "idempotency_key_reused" {
				t.Fatalf("another body: %s", raw)
			}
			if r := p.record(t, id); r.Version != 2 {
				t.Fatal("a refused replay rotated the key")
			}

			// A reader of Redis who knows the id and the Idempotency-Key
			// cannot open the box, as it could when the box was sealed
			// under them alone.
			box := rec.Rotation.Box
			sum := sha256.Sum256([]byte("llm-gateway rotate replay\x00" + id + "\x00" + idem))
			block, _ := aes.NewCipher(sum[:])
			g, _ := cipher.NewGCM(block)
			if len(box) < g.NonceSize() {
				t.Fatal("no replay box stored")
			}
			if _, err := g.Open(nil, box[:g.NonceSize()], box[g.NonceSize():], nil); err == nil {
				t.Fatal("the replay box opens without the server secret")
			}
		}
	})

	t.Run("config credentials sealed", func(t *testing.T) {
		var cfg struct{ Slug string }
		p.must(t, 0, gatewayKey, "POST", "/configs", `{"name":"sealed","config":{"virtual_key":"openai","api_key":"sk-test-provider"}}`, 200, &cfg)
		for n := 0; ; n++ {
			code, raw := p.send(t, 1, gatewayKey, "POST", "/chat/completions", chat, "x-gateway-config", cfg.Slug)
			if code == 200 {
				break
			}
			if n == 500 {
				t.Fatalf("the other instance does not route with the sealed config: %d %s", code, raw)
			}
			waitABit()
		}
		ctx := context.Background()
		n := 0
		for it := p.rc.Scan(ctx, 0, p.prefix+"*", 1000).Iterator(); it.Next(ctx); n++ {
			if v, err := p.rc.Get(ctx, it.Val()).Result(); err == nil && strings.Contains(v, "sk-test-provider") {
				t.Fatalf("Redis key %s holds the config's provider key", it.Val())
			}
		}
		if n == 0 {
			t.Fatal("nothing was stored under the prefix")
		}
	})
}

// waitABit is the interval of the polls above, each bounded by a count.
func waitABit() { time.Sleep(10 * time.Millisecond) }
