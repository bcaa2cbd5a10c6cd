package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	// Registers llm_ratelimit and the policy API, until the root module
	// imports it; a second blank import is harmless.
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/ratelimit"
)

// Rate-limit tests run their own Caddyfile (rlSite): a storage directory of
// their own, so policies created through the API never outlive the test,
// three gateway keys, and llm_ratelimit inside the /v1 handle block as
// examples/Caddyfile places it.
//
// Keys: the harness's test key and rlSecondKey share workspace rlWS (and
// organisation rlOrg); rlOtherKey is in another workspace of the same
// organisation.
const (
	rlSecondKey = "rl-second-key-0123456789"
	rlOtherKey  = "rl-other-key-0123456789"
)

// The workspaces and the organisation are new in every test process, so
// that test runs sharing a Redis never see each other's policies: a policy
// applies only within its organisation, and cleanup removes exactly this
// organisation's records and counters.
var (
	rlWS      = uuid.NewString()
	rlOtherWS = uuid.NewString()
	rlOrg     = uuid.NewString()
)

// rlRedisDB is the only Redis database these tests use.
const rlRedisDB = 9

// rlSite describes a rate-limit test Caddyfile.
type rlSite struct {
	// Limit is the body of llm_ratelimit { }.
	Limit string
	// NoLimiter leaves llm_ratelimit out of the /v1 route.
	NoLimiter bool
	// Redis is the redis block of the llm app (e.g. redisBlock(true)).
	Redis string
	// Storage is the file_system storage root.
	Storage string
	// HTTPPort, AdminPort and Log default to the harness's.
	HTTPPort, AdminPort int
	Log                 string
}

func (s rlSite) caddyfile() string {
	if s.HTTPPort == 0 {
		s.HTTPPort, s.AdminPort, s.Log = httpPort, adminPort, logPath
	}
	limiter := ""
	if !s.NoLimiter {
		limiter = "llm_ratelimit {\n" + s.Limit + "\n\t\t}"
	}
	return fmt.Sprintf(`{
	admin localhost:%d
	auto_https off
	persist_config off
	storage file_system %s
	log {
		output file %s
		format json
		level DEBUG
	}
	llm {
		api_key test {env.TEST_GATEWAY_KEY} {
			workspace_id %[5]s
			organisation_id %[7]s
		}
		api_key second %[8]s {
			workspace_id %[5]s
			organisation_id %[7]s
		}
		api_key other %[9]s {
			workspace_id %[6]s
			organisation_id %[7]s
		}
		%[10]s
	}
}

:%[4]d {
	handle /v1/* {
		%[11]s
		llm_gateway {
			custom_host_allow loopback
		}
	}
}
`, s.AdminPort, s.Storage, s.Log, s.HTTPPort, rlWS, rlOtherWS, rlOrg, rlSecondKey, rlOtherKey, s.Redis, limiter)
}

// loadRL runs s in the process's Caddy, with a fresh storage directory
// unless s names one.
func loadRL(t *testing.T, s rlSite) {
	t.Helper()
	if s.Storage == "" {
		s.Storage = storageDir(t)
	}
	if s.HTTPPort == 0 {
		newHTTPPort()
	}
	cfg, err := adapt(s.caddyfile())
	if err != nil {
		t.Fatalf("adapting: %v\n%s", err, s.caddyfile())
	}
	truncateLog()
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("loading: %v\n%s", err, s.caddyfile())
	}
	// Wait for the previous server's listener to close, and drop pooled
	// connections to it: a request on either would be reset.
	settleReload()
	rlClient.CloseIdleConnections()
}

// storageDir returns a new directory for Caddy's storage. It lives in the
// harness's directory, removed when the process ends, not at the end of
// the test: Caddy keeps running (and may write to its storage) until the
// next test loads another config.
func storageDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Dir(logPath), "storage")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// redisBlock is the llm app's redis option for the test database.
func redisBlock(failOpen bool) string {
	mode := "fail_closed"
	if failOpen {
		mode = "fail_open"
	}
	return fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t\t%s\n\t\t}", redistest.Addr(), rlRedisDB, mode)
}

// requireRedis returns a client on the test database and, when the test
// ends, deletes this process's policies from the llm app's policy hash and
// their counters (and nothing else, as other test processes may be using
// the same database). Without Redis the test is skipped, unless
// REQUIRE_REDIS=1 makes that a failure.
func requireRedis(t *testing.T) *redis.Client {
	t.Helper()
	c := redistest.Client(t, rlRedisDB)
	t.Cleanup(func() { cleanRedis(t, c) })
	return c
}

// The llm app's Redis names: the policy hash and the counter prefix.
const (
	policyHash    = "llmgw:policies"
	counterPrefix = "llmgw:rl:"
)

// cleanRedis deletes the policies of this process's organisation and
// every counter of those policies.
func cleanRedis(t *testing.T, c *redis.Client) {
	ctx := context.Background()
	all, err := c.HGetAll(ctx, policyHash).Result()
	if err != nil {
		t.Logf("cleaning Redis: %v", err)
		return
	}
	for id, rec := range all {
		var p struct {
			OrganisationID string `json:"organisation_id"`
		}
		if json.Unmarshal([]byte(rec), &p) != nil || p.OrganisationID != rlOrg {
			continue
		}
		c.HDel(ctx, policyHash, id)
		iter := c.Scan(ctx, 0, counterPrefix+id+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	}
}

// rlChat is a chat completion with the given gateway key through the fake
// provider at upURL, plus extra headers (name, value pairs).
func rlChat(t testing.TB, base, key, upURL string, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	if body == "" {
		body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	}
	h := append([]string{"x-gateway-api-key", key, "x-gateway-provider", "openai", "x-gateway-custom-host", upURL,
		"Authorization", "Bearer sk-test-provider"}, headers...)
	return rawDo(t, base, http.MethodPost, "/chat/completions", []byte(body), h...)
}

// rawDo is do against any gateway base URL, safe to call from goroutines
// (it reports errors instead of failing the test).
func rawDo(t testing.TB, base, method, path string, body []byte, headers ...string) (*http.Response, []byte) {
	t.Helper()
	resp, raw, err := tryDo(base, method, path, body, headers...)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return &http.Response{Header: http.Header{}}, nil
	}
	return resp, raw
}

var rlClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}, Timeout: 60 * time.Second}

func tryDo(base, method, path string, body []byte, headers ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rlClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp, buf.Bytes(), err
}

// api calls the policy API with a gateway key and decodes the JSON answer.
func api(t *testing.T, key, method, path, body string) (int, map[string]any) {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	resp, raw := rawDo(t, gatewayURL(), method, path, b, "x-gateway-api-key", key)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

// createPolicy creates a policy through the API and returns its id.
func createPolicy(t *testing.T, key, body string) string {
	t.Helper()
	status, m := api(t, key, http.MethodPost, "/policies/rate-limits", body)
	if status != 200 || m["object"] != "policy_rate_limits" {
		t.Fatalf("create: %d %v", status, m)
	}
	id, _ := m["id"].(string)
	return id
}

// errParam returns the "param" of an error envelope.
func errParam(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	p, _ := e["param"].(string)
	return p
}

func errField(m map[string]any, f string) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e[f].(string)
	return s
}

// countStatuses tallies response codes.
func countStatuses(codes []int) map[int]int {
	out := map[int]int{}
	for _, c := range codes {
		out[c]++
	}
	return out
}
