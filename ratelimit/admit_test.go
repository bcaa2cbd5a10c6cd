package ratelimit

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

const chatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`

// TestAdmitMatching checks which requests a policy applies to, and that the
// body is read only when a policy needs it.
func TestAdmitMatching(t *testing.T) {
	tests := []struct {
		name     string
		conds    []policies.Condition
		typ      string
		group    []string
		key      string
		body     string
		headers  []string
		match    bool
		wantBody bool // the body was read and shared with the gateway
		wantKey  string
	}{
		{name: "workspace", conds: cond("workspace_id", testWS), key: "key-alice", body: chatBody, match: true, wantKey: "api_key=" + testWS + "=alice"},
		{name: "other org never matches", conds: cond("api_key", "*"), key: "key-carol", body: chatBody},
		// Tenancy: a policy of alice's workspace never applies to another
		// workspace of the same organisation, whatever its conditions say.
		{name: "other workspace never matches", conds: cond("api_key", "*"), key: "key-dan", body: chatBody},
		{name: "conditions naming another workspace", conds: cond("workspace_id", siblingWS), key: "key-dan", body: chatBody},
		{name: "conditions naming another key", conds: cond("api_key", "dan"), key: "key-dan", body: chatBody},
		{name: "unauthenticated passes to the gateway", conds: cond("api_key", "*"), key: "wrong", body: chatBody},
		{name: "no key", conds: cond("api_key", "*"), key: "", body: chatBody},
		{name: "api key name", conds: cond("api_key", "bob"), key: "key-alice", body: chatBody},
		{name: "model needs the body", conds: cond("model", "gpt-4o"), key: "key-alice", body: chatBody, match: true, wantBody: true},
		{name: "other model", conds: cond("model", "gpt-4o-mini"), key: "key-alice", body: chatBody, wantBody: true},
		{name: "tokens policy reads the body", conds: cond("api_key", "*"), typ: policies.TypeTokens, key: "key-alice", body: chatBody, match: true, wantBody: true},
		{name: "group by model", conds: cond("api_key", "*"), group: []string{"model"}, key: "key-alice", body: chatBody, match: true, wantBody: true, wantKey: "model=gpt-4o"},
		{name: "failed condition skips the body", conds: cond("api_key", "bob", "model", "gpt-4o"), key: "key-alice", body: chatBody},
		{name: "metadata", conds: cond("metadata._user", "u1"), group: []string{"metadata._user"}, key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Metadata", `{"_user":"u1","n":2}`}, match: true, wantKey: "metadata._user=u1"},
		{name: "metadata alias header", conds: cond("metadata.n", "2"), key: "key-alice", body: chatBody,
			headers: []string{"X-Portkey-Metadata", `{"n":2}`}, match: true},
		{name: "metadata absent", conds: cond("metadata._user", "*"), key: "key-alice", body: chatBody},
		{name: "provider header", conds: cond("provider", "openai"), key: "key-alice", body: chatBody, headers: []string{"X-Gateway-Provider", "OpenAI"}, match: true},
		{name: "provider from virtual key", conds: cond("provider", "anthropic", "virtual_key", "vk-anthropic"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Virtual-Key", "vk-anthropic"}, match: true},
		{name: "saved config", conds: cond("config_id", "cfg-1", "provider", "openai"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", "cfg-1"}, match: true},
		{name: "inline config is no config id", conds: cond("config_id", "*"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", `{"provider":"openai","api_key":"x"}`}},
		{name: "inline config virtual key", conds: cond("provider", "anthropic", "virtual_key", "vk-anthropic"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", `{"virtual_key":"vk-anthropic"}`}, match: true},
		{name: "config over provider header", conds: cond("provider", "anthropic"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", `{"virtual_key":"vk-anthropic"}`, "X-Gateway-Provider", "openai"}, match: true},
		{name: "strategy over two providers has none", conds: cond("provider", "*"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"x"},{"virtual_key":"vk-anthropic"}]}`}},
		{name: "strategy over one provider", conds: cond("provider", "openai"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"x"},{"provider":"openai","api_key":"y"}]}`}, match: true},
		{name: "malformed headers match no routing", conds: cond("provider", "openai"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Provider", "openai", "X-Gateway-Request-Timeout", "soon"}},
		{name: "inline config provider", conds: cond("provider", "openai"), key: "key-alice", body: chatBody,
			headers: []string{"X-Gateway-Config", `{"provider":"openai","api_key":"x"}`}, match: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := newControl()
			typ := tt.typ
			if typ == "" {
				typ = policies.TypeRequests
			}
			group := tt.group
			if group == nil {
				group = []string{"api_key"}
			}
			p := addPolicy(t, ctl, typ, policies.UnitRPM, 100, tt.conds, group...)
			h := newHandler(t, ctl)
			r := newRequest(tt.key, []byte(tt.body), tt.headers...)
			v, err := h.admit(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if (v != nil) != tt.match {
				t.Fatalf("matched = %v, want %v", v != nil, tt.match)
			}
			_, shared := ingress.Body(r)
			if shared != tt.wantBody {
				t.Fatalf("body shared = %v, want %v", shared, tt.wantBody)
			}
			if shared {
				// The body is still readable by a handler that reads r.Body.
				if b, _ := io.ReadAll(r.Body); string(b) != tt.body {
					t.Fatalf("r.Body after admission = %q", b)
				}
			}
			if v == nil {
				return
			}
			g := v.grants[0]
			if g.policy.ID != p.ID || !g.dec.Allowed {
				t.Fatalf("grant %+v", g)
			}
			if tt.wantKey != "" && !strings.Contains(g.key, tt.wantKey) {
				t.Fatalf("group key %q lacks %q", g.key, tt.wantKey)
			}
		})
	}
}

// TestAdmitCounts checks the admission math: requests cost one, tokens
// reserve the estimate capped at the limit, and a refusal is reported
// with the refusing policy.
func TestAdmitCounts(t *testing.T) {
	ctl := newControl()
	reqs := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 3, cond("api_key", "*"), "api_key")
	h := newHandler(t, ctl)
	for i := 1; i <= 3; i++ {
		v, err := h.admit(newRequest("key-alice", []byte(chatBody)), nil)
		if err != nil || v == nil || v.refused != nil {
			t.Fatalf("request %d: %+v, %v", i, v, err)
		}
		if got := v.grants[0].dec.Remaining; got != int64(3-i) {
			t.Fatalf("request %d: remaining %d", i, got)
		}
	}
	v, _ := h.admit(newRequest("key-alice", []byte(chatBody)), nil)
	if v == nil || v.refused == nil || v.refused.policy.ID != reqs.ID || v.refused.dec.RetryAfter <= 0 {
		t.Fatalf("4th request: %+v", v)
	}
	// bob has his own counter (group_by api_key).
	if v, _ := h.admit(newRequest("key-bob", []byte(chatBody)), nil); v == nil || v.refused != nil {
		t.Fatalf("bob: %+v", v)
	}

	ctl = newControl()
	tok := addPolicy(t, ctl, policies.TypeTokens, policies.UnitRPM, 1000, cond("api_key", "*"), "api_key")
	h = newHandler(t, ctl)
	v, _ = h.admit(newRequest("key-alice", []byte(chatBody)), nil)
	want := estimateTokens([]byte(chatBody), int64(len(chatBody)))
	if v == nil || v.grants[0].cost != want || v.grants[0].dec.Remaining != 1000-want {
		t.Fatalf("tokens grant %+v, want cost %d", v.grants[0], want)
	}
	// A reservation above the limit is capped at the limit.
	big := `{"model":"m","max_tokens":5000}`
	v, _ = h.admit(newRequest("key-bob", []byte(big)), nil)
	if v == nil || v.grants[0].cost != 1000 || v.refused != nil {
		t.Fatalf("capped grant %+v", v)
	}
	if r := remaining(t, ctl.limiter, tok, v.grants[0].key); r != 0 {
		t.Fatalf("bob remaining %d", r)
	}
}

// TestAdmitAllOrNothing checks that when a later policy refuses, the units
// the earlier ones took are given back.
func TestAdmitAllOrNothing(t *testing.T) {
	ctl := newControl()
	loose := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 100, cond("api_key", "*"), "api_key")
	tight := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 1, cond("api_key", "*"), "workspace_id")
	h := newHandler(t, ctl)
	if v, _ := h.admit(newRequest("key-alice", []byte(chatBody)), nil); v == nil || v.refused != nil || len(v.grants) != 2 {
		t.Fatalf("first: %+v", v)
	}
	v, _ := h.admit(newRequest("key-alice", []byte(chatBody)), nil)
	if v == nil || v.refused == nil || v.refused.policy.ID != tight.ID {
		t.Fatalf("second: %+v", v)
	}
	if r := remaining(t, ctl.limiter, loose, loose.GroupKey(&policies.Attributes{WorkspaceID: testWS, APIKey: "alice"})); r != 99 {
		t.Fatalf("loose policy remaining %d after a refused request, want 99 (refunded)", r)
	}
}

// TestStaticPolicies checks Caddyfile policies: defaults (every request,
// per key), ids from names, and that they apply across organisations.
func TestStaticPolicies(t *testing.T) {
	ctl := newControl()
	h := newHandler(t, ctl, &StaticPolicy{Name: "global", Type: "requests", Unit: "rpd", Value: 1})
	for _, key := range []string{"key-alice", "key-carol"} {
		v, _ := h.admit(newRequest(key, nil), nil)
		if v == nil || v.refused != nil || v.grants[0].policy.ID != StaticID("global") {
			t.Fatalf("%s first: %+v", key, v)
		}
		v, _ = h.admit(newRequest(key, nil), nil)
		if v == nil || v.refused == nil || v.refused.dec.RetryAfter <= noRetryAfter {
			t.Fatalf("%s second: %+v", key, v)
		}
	}
	// Name-based (SHA-1) UUIDs: the same on every instance and reload.
	if id := StaticID("global"); id == StaticID("other") || id[14] != '5' {
		t.Fatalf("static id %s is not a name-based UUID", id)
	}
}

// TestFailMode checks fail-open and fail-closed on a broken limiter, and
// that while it is down only the first request waits for it.
func TestFailMode(t *testing.T) {
	for _, closed := range []bool{false, true} {
		ctl := newControl()
		calls := new(atomic.Int64)
		ctl.limiter, ctl.failClosed = failingLimiter{calls}, closed
		addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 10, cond("api_key", "*"), "api_key")
		h := newHandler(t, ctl)
		for i := 0; i < 3; i++ {
			if v, err := h.admit(newRequest("key-alice", []byte(chatBody)), nil); v != nil || (err != nil) != closed {
				t.Fatalf("closed=%v: %+v %v", closed, v, err)
			}
		}
		if calls.Load() != 1 {
			t.Fatalf("the broken limiter was called %d times for 3 requests, want 1", calls.Load())
		}
		h.st.down.ok()
		w := httptest.NewRecorder()
		next := &nextHandler{}
		if err := h.ServeHTTP(w, newRequest("key-alice", []byte(chatBody)), next); err != nil {
			t.Fatal(err)
		}
		if closed {
			if next.called || w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"type":"service_unavailable"`) ||
				w.Header().Get("X-Gateway-Error") != "true" || w.Header().Get("Retry-After") != "1" {
				t.Fatalf("fail closed: %d %s", w.Code, w.Body)
			}
		} else if !next.called || w.Header().Get(hdrLimitRequests) != "" {
			t.Fatalf("fail open: next called %v, headers %v", next.called, w.Header())
		}
	}
}

// TestServeHTTP checks the 429 answer and the headers of admitted requests.
func TestServeHTTP(t *testing.T) {
	ctl := newControl()
	name := "two per minute"
	p := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 2, cond("api_key", "*"), "api_key")
	p.Name = &name
	_ = ctl.store.Put(t.Context(), p)
	h := newHandler(t, ctl)
	for i, want := range []string{"1", "0"} {
		w := httptest.NewRecorder()
		next := &nextHandler{}
		_ = h.ServeHTTP(w, newRequest("key-alice", []byte(chatBody)), next)
		if !next.called || w.Header().Get("x-ratelimit-remaining-requests") != want ||
			w.Header().Get("x-ratelimit-limit-requests") != "2" || w.Header().Get("x-ratelimit-reset-requests") == "" {
			t.Fatalf("request %d: called %v, headers %v", i, next.called, w.Header())
		}
	}
	w := httptest.NewRecorder()
	next := &nextHandler{}
	_ = h.ServeHTTP(w, newRequest("key-alice", []byte(chatBody)), next)
	if next.called || w.Code != http.StatusTooManyRequests {
		t.Fatalf("third: %d", w.Code)
	}
	var env struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Type != "rate_limit_exceeded" || env.Error.Code != "rate_limit_exceeded" || !strings.Contains(env.Error.Message, `"two per minute"`) {
		t.Fatalf("429 body %s", w.Body)
	}
	hd := w.Header()
	secs, _ := strconv.Atoi(hd.Get("Retry-After"))
	ms, _ := strconv.Atoi(hd.Get("retry-after-ms"))
	if secs < 1 || secs > 61 || ms < 1 || (ms+999)/1000 != secs || hd.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("429 headers %v", hd)
	}
	// A minute's window plus one bucket may exceed a minute; SDKs are
	// told not to retry exactly when it does.
	if (hd.Get("x-should-retry") == "false") != (ms > 60000) {
		t.Fatalf("x-should-retry %q with retry-after-ms %d", hd.Get("x-should-retry"), ms)
	}
}

// TestSettlement checks that token reservations are settled from the
// gateway's final entry: overshoot charged, failures and cache hits
// refunded, requests policies left alone.
func TestSettlement(t *testing.T) {
	tests := []struct {
		name  string
		entry observe.Entry
		used  int64
	}{
		{name: "usage below reservation", entry: observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 9, CompletionTokens: 3, TotalTokens: 12}}, used: 12},
		{name: "overshoot charged in full", entry: observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 400, CompletionTokens: 300, TotalTokens: 700}}, used: 700},
		{name: "embeddings total", entry: observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 4, TotalTokens: 4}}, used: 4},
		{name: "failure refunds", entry: observe.Entry{Status: 502}, used: 0},
		{name: "gateway error refunds", entry: observe.Entry{Status: 400}, used: 0},
		{name: "success without usage keeps the reservation", entry: observe.Entry{Status: 200}, used: -1},
		{name: "cache hit is free", entry: observe.Entry{Status: 200, CacheState: "HIT", Usage: &providers.Usage{PromptTokens: 9, TotalTokens: 9}}, used: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := newControl()
			tok := addPolicy(t, ctl, policies.TypeTokens, policies.UnitRPM, 1000, cond("api_key", "*"), "api_key")
			reqs := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 10, cond("api_key", "*"), "api_key")
			h := newHandler(t, ctl)
			r := newRequest("key-alice", []byte(chatBody))
			if err := h.ServeHTTP(httptest.NewRecorder(), r, &nextHandler{}); err != nil {
				t.Fatal(err)
			}
			key := tok.GroupKey(&policies.Attributes{WorkspaceID: testWS, APIKey: "alice"})
			reserved := estimateTokens([]byte(chatBody), int64(len(chatBody)))
			if got := remaining(t, ctl.limiter, tok, key); got != 1000-reserved {
				t.Fatalf("before settlement remaining %d, want %d", got, 1000-reserved)
			}
			e := tt.entry
			observe.RunDone(r, &e)
			used := tt.used
			if used < 0 {
				used = reserved
			}
			if got := remaining(t, ctl.limiter, tok, key); got != 1000-used {
				t.Fatalf("after settlement remaining %d, want %d", got, 1000-used)
			}
			if got := remaining(t, ctl.limiter, reqs, reqs.GroupKey(&policies.Attributes{WorkspaceID: testWS, APIKey: "alice"})); got != 9 {
				t.Fatalf("requests policy remaining %d, want 9 (a request counts whatever its outcome)", got)
			}
		})
	}
}

// TestReadBodyBounds checks that a body too large for the handler is
// handed to the gateway intact.
func TestReadBodyBounds(t *testing.T) {
	ctl := newControl()
	addPolicy(t, ctl, policies.TypeTokens, policies.UnitRPM, 1e6, cond("api_key", "*"), "api_key")
	h := newHandler(t, ctl)
	h.MaxRequestBody = 16

	big := `{"model":"m","messages":"0123456789"}`
	r := newRequest("key-alice", []byte(big))
	r.ContentLength = -1 // unknown: the handler must read to find out
	v, _ := h.admit(r, nil)
	if _, shared := ingress.Body(r); shared {
		t.Fatal("an oversized body was shared")
	}
	if b, _ := io.ReadAll(r.Body); string(b) != big {
		t.Fatalf("gateway would read %q", b)
	}
	if v == nil || v.grants[0].cost != estimateTokens(nil, 17) {
		t.Fatalf("oversized grant %+v", v)
	}

}

// TestStoreFailure checks a policy store that cannot be loaded (and
// never was: no API policy is known): in either fail mode the Caddyfile
// policies still apply, and a request none applies to needs no store
// (before, failing closed answered 503 to every request).
func TestStoreFailure(t *testing.T) {
	for _, closed := range []bool{false, true} {
		for _, static := range []bool{false, true} {
			ctl := newControl()
			ctl.store, ctl.failClosed = brokenStore{ctl.store}, closed
			var sp []*StaticPolicy
			if static {
				sp = append(sp, &StaticPolicy{Name: "s", Type: "requests", Unit: "rpm", Value: 5})
			}
			h := newHandler(t, ctl, sp...)
			v, err := h.admit(newRequest("key-alice", nil), nil)
			if err != nil || (v == nil) == static || (static && v.grants[0].policy.ID != StaticID("s")) {
				t.Fatalf("fail closed %v, Caddyfile policy %v: %+v %v", closed, static, v, err)
			}
		}
	}
}

type brokenStore struct{ policies.CachedStore }

func (brokenStore) Active(context.Context) ([]*policies.Policy, error) { return nil, errDown }
