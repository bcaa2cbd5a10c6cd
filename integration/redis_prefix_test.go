package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
)

// TestRedisPrefixCoversEveryKey runs one gateway against a Redis of its
// own (a redis-server the test starts, so nothing else writes there) with
// a key_prefix, and uses every feature that keeps state in Redis: rate-limit
// and usage-limit policies with their counters and alert, API keys, virtual
// keys and configs with their audit entries and revocation lists, the
// response cache, session affinity pins, files and a managed batch. Then it scans that Redis: every
// key and every channel the gateway listens on starts with the prefix, and each feature left at least one key (so a
// feature that silently stopped writing to Redis fails the test too).
func TestRedisPrefixCoversEveryKey(t *testing.T) {
	addr, rc := startPlainRedis(t)
	const prefix = "fleet-p:"
	up := newFakeOpenAI(t)
	var alerts atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		alerts.Add(1)
	}))
	t.Cleanup(receiver.Close)
	os.Setenv("TEST_KEYS_ENC", keysEncryptionKey)
	os.Setenv("TEST_ALERT_SECRET", alertSecret)
	llm := fmt.Sprintf("redis %s {\n\t\t\tkey_prefix %s\n\t\t}\n\t\t", addr, prefix) +
		"keys {\n\t\t\tencryption_key {env.TEST_KEYS_ENC}\n\t\t}\n\t\t" +
		fmt.Sprintf("budgets {\n\t\t\talert_webhook %s\n\t\t\talert_secret {env.TEST_ALERT_SECRET}\n\t\t\talert_allow loopback\n\t\t}\n\t\t", receiver.URL) +
		vkOpenAI("vk-prefix", up.URL)
	loadRL(t, rlSite{Redis: llm})

	run := uuid.NewString()
	meta := []string{"x-gateway-metadata", `{"run":"` + run + `"}`}
	cond := `"conditions":[{"key":"metadata.run","value":"` + run + `"}],"group_by":[{"key":"metadata.run"}]`
	createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":1000,`+cond+`}`)
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits",
		`{"name":"prefix budget","type":"tokens","credit_limit":1000000,"alert_threshold":1,"periodic_reset":"monthly",`+cond+`}`); status != 200 {
		t.Fatalf("usage limit: %d %v", status, m)
	}

	// Records of the keys API.
	for _, c := range []struct{ path, body string }{
		{"/api-keys/workspace/service", `{"name":"prefix-key","scopes":["completions.write"]}`},
		{"/virtual-keys", `{"name":"prefix-vk","provider":"openai","key":"sk-prefix-provider-key"}`},
		{"/configs", `{"name":"prefix-config","config":{"retry":{"attempts":2}}}`},
	} {
		if status, m := api(t, gatewayKey, http.MethodPost, c.path, c.body); status != 200 {
			t.Fatalf("POST %s: %d %v", c.path, status, m)
		}
	}

	// Counters, the alert and the cache: the second request is a cache hit.
	for i, want := range []string{"MISS", "HIT"} {
		resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "", append(meta, "x-gateway-config", `{"cache":{"mode":"simple"}}`)...)
		if resp.StatusCode != 200 || resp.Header.Get("x-gateway-cache-status") != want {
			t.Fatalf("request %d: %d cache %q, want 200 %s: %s", i+1, resp.StatusCode, resp.Header.Get("x-gateway-cache-status"), want, raw)
		}
	}

	// A session pinned by affinity.
	affinity := `{"strategy":{"mode":"loadbalance","affinity":{"ttl":60}},"targets":[` +
		`{"provider":"openai","api_key":"sk-test-provider","custom_host":"` + up.URL + `"},` +
		`{"provider":"openai","api_key":"sk-test-provider","custom_host":"` + up.URL + `/"}]}`
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "", append(meta, "x-gateway-config", affinity, "x-gateway-session-id", run)...); resp.StatusCode != 200 {
		t.Fatalf("affinity request: %d %s", resp.StatusCode, raw)
	}

	// Files and a managed batch, run to its end.
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHeader("x-gateway-api-key", gatewayKey))
	ctx := context.Background()
	line := `{"custom_id":"req-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader([]byte(line)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"},
		option.WithHeader("x-gateway-virtual-key", "vk-prefix"), option.WithHeader(meta[0], meta[1]))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); b.Status != openai.BatchStatusCompleted; time.Sleep(50 * time.Millisecond) {
		if b, err = client.Batches.Get(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch still %s", b.Status)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); alerts.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the usage limit's alert never reached the receiver")
		}
	}

	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var unprefixed []string
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			unprefixed = append(unprefixed, k)
		}
	}
	if len(unprefixed) > 0 {
		t.Fatalf("%d of %d keys were written without the prefix %q: %v", len(unprefixed), len(keys), prefix, unprefixed)
	}
	// Each feature wrote under the prefix; the names below are the kinds
	// of records, as the stores spell them.
	for _, want := range []string{"llmgw:policies", "llmgw:rl:budget|", "llm:budget-once:", "llm:budget-alerted", "usage-limits/",
		"keys/api_keys/", "keys/virtual_keys/", "keys/configs/", "keys/audit/", "llm:cache:", "llm:affinity:", "/files/", "/batches/"} {
		found := false
		for _, k := range keys {
			if strings.Contains(k, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no key holds %q: the feature wrote nothing to Redis (keys: %v)", want, keys)
		}
	}
	// The change channels too: every one the gateway listens on.
	channels, err := rc.PubSubChannels(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range channels {
		if !strings.HasPrefix(c, prefix) {
			t.Errorf("channel %q has no prefix %q (all: %v)", c, prefix, channels)
		}
	}
	if len(channels) == 0 {
		t.Error("the gateway listens on no channel of its Redis")
	}
	t.Logf("%d keys and %d channels (%v), all under %q", len(keys), len(channels), channels, prefix)
}

// startPlainRedis starts a redis-server of the test's own on a free port,
// with nothing persisted, until the test ends, and returns its address
// and a client. It skips the test when redis-server is not installed,
// unless Redis is required (REQUIRE_REDIS=1), which makes that a failure.
func startPlainRedis(t *testing.T) (string, *redis.Client) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not installed and REQUIRE_REDIS=1")
		}
		t.Skip("skipping: redis-server is not installed")
	}
	port := freePort()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("redis-server exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer in 10s:\n%s", out.String())
		}
	}
	return addr, c
}
