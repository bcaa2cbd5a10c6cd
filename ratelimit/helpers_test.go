package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	// The providers the gateway knows, which routing resolution checks.
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/all"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Test identities: alice and bob share a workspace, dan is another
// workspace of their organisation, carol is another organisation.
var (
	testWS    = "11111111-1111-4111-8111-111111111111"
	testOrg   = "22222222-2222-4222-8222-222222222222"
	otherOrg  = "33333333-3333-4333-8333-333333333333"
	otherWS   = "44444444-4444-4444-8444-444444444444"
	testAlice = &identity.Caller{Name: "alice", WorkspaceID: testWS, OrganisationID: testOrg}
	testBob   = &identity.Caller{Name: "bob", WorkspaceID: testWS, OrganisationID: testOrg}
	testCarol = &identity.Caller{Name: "carol", WorkspaceID: otherWS, OrganisationID: otherOrg}
	siblingWS = "55555555-5555-4555-8555-555555555555"
	testDan   = &identity.Caller{Name: "dan", WorkspaceID: siblingWS, OrganisationID: testOrg}
)

// fakeControl stands in for the llm app.
type fakeControl struct {
	keys       map[string]*identity.Caller
	store      policies.CachedStore
	limiter    policies.Limiter
	failClosed bool
	vks        map[string]*providers.Settings
	configs    map[string][]byte
	router     *controlplane.Router
}

func (f *fakeControl) Authenticate(key string) (*identity.Caller, bool) {
	id, ok := f.keys[key]
	return id, ok
}
func (f *fakeControl) Policies() policies.CachedStore     { return f.store }
func (f *fakeControl) Limiter() policies.Limiter          { return f.limiter }
func (f *fakeControl) FailClosed() bool                   { return f.failClosed }
func (f *fakeControl) ControlPlane() *controlplane.Router { return f.router }
func (f *fakeControl) SavedConfig(id string) ([]byte, bool) {
	b, ok := f.configs[id]
	return b, ok
}
func (f *fakeControl) VirtualKey(name string) (*providers.Settings, bool) {
	s, ok := f.vks[name]
	return s, ok
}

func newControl() *fakeControl {
	return &fakeControl{
		keys:    map[string]*identity.Caller{"key-alice": testAlice, "key-bob": testBob, "key-carol": testCarol, "key-dan": testDan},
		store:   policies.NewMemoryStore(policies.StoreConfig{}),
		limiter: policies.NewMemoryLimiter(),
		vks:     map[string]*providers.Settings{"vk-anthropic": {Provider: "anthropic"}},
		configs: map[string][]byte{"cfg-1": []byte(`{"provider":"OpenAI","api_key":"x"}`)},
	}
}

// newHandler returns a provisioned handler over ctl with the given
// Caddyfile policies.
func newHandler(tb testing.TB, ctl control, static ...*StaticPolicy) *Handler {
	tb.Helper()
	h := &Handler{Policies: static, MaxRequestBody: DefaultMaxRequestBody, ctl: ctl, logger: zap.NewNop(), st: new(state),
		configs: routing.NewConfigCache(1024)}
	var err error
	if h.static, err = buildStatic(static); err != nil {
		tb.Fatal(err)
	}
	return h
}

// addPolicy stores an API policy in alice's workspace and returns it.
func addPolicy(tb testing.TB, ctl *fakeControl, typ, unit string, value float64, conds []policies.Condition, group ...string) *policies.Policy {
	tb.Helper()
	p := &policies.Policy{Type: typ, Unit: unit, Value: value, Conditions: conds, WorkspaceID: testWS, OrganisationID: testOrg}
	for _, g := range group {
		p.GroupBy = append(p.GroupBy, policies.GroupBy{Key: g})
	}
	if err := ctl.store.Create(context.Background(), p); err != nil {
		tb.Fatal(err)
	}
	return p
}

func cond(kv ...string) []policies.Condition {
	var out []policies.Condition
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, policies.Condition{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// newRequest builds a request the way Caddy hands it to a handler: with
// the vars table that ingress.SetBody and observe.OnDone use.
func newRequest(key string, body []byte, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if body == nil {
		r = httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	}
	if key != "" {
		r.Header.Set("X-Gateway-Api-Key", key)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{})
	return r.WithContext(ctx)
}

// remaining reports the units left for key without consuming any.
func remaining(tb testing.TB, lim policies.Limiter, p *policies.Policy, key string) int64 {
	tb.Helper()
	d, err := lim.Admit(context.Background(), key, p.Limit(), p.Window(), 0)
	if err != nil {
		tb.Fatal(err)
	}
	return d.Remaining
}

// failingLimiter fails every call, as a Redis limiter does when Redis is
// down, and counts the calls.
type failingLimiter struct{ calls *atomic.Int64 }

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (f failingLimiter) Admit(context.Context, string, int64, time.Duration, int64) (policies.Decision, error) {
	if f.calls != nil {
		f.calls.Add(1)
	}
	return policies.Decision{}, errDown
}
func (f failingLimiter) Adjust(context.Context, string, int64, time.Duration, int64) error {
	if f.calls != nil {
		f.calls.Add(1)
	}
	return errDown
}

// nextHandler records whether the request got through.
type nextHandler struct {
	called bool
	status int
}

func (n *nextHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	n.called = true
	if n.status != 0 {
		w.WriteHeader(n.status)
	}
	return nil
}

// newRedisLimiter returns a RedisLimiter under a key prefix unique to the
// test, whose keys are deleted at the end. Without Redis the test is
// skipped, unless REQUIRE_REDIS=1 makes that a failure.
func newRedisLimiter(tb testing.TB) *policies.RedisLimiter {
	tb.Helper()
	c := redistest.Client(tb, 0)
	prefix := "llmgw:test:ratelimit:" + uuid.NewString() + ":"
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		_ = c.Close()
	})
	return policies.NewRedisLimiter(c, policies.WithKeyPrefix(prefix))
}
