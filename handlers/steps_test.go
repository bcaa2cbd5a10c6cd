package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// planSteps plans q's attempts with the response cache rc and returns
// the first step of its executor (the sender when no step is needed).
func planSteps(t *testing.T, q *Request, rc *responseCache, gs *guardSession) step {
	t.Helper()
	g := &Gateway{}
	if err := g.planAttempts(context.Background(), q, rc, q.Envelope); err != nil {
		t.Fatal(err)
	}
	return steps(q, &executor{g: g, q: q}, rc, gs).(*planned).next
}

// recordStep is a fake next step: it records the plans it was given and
// answers with a held 200 (or the statuses queued in answers).
type recordStep struct {
	got     []attemptPlan
	answers []int
}

func (s *recordStep) cached(context.Context, attemptPlan) (routing.Outcome, bool) {
	return routing.Outcome{}, false
}

func (s *recordStep) attempt(_ context.Context, p attemptPlan) routing.Outcome {
	s.got = append(s.got, p)
	status := http.StatusOK
	if len(s.answers) > 0 {
		status, s.answers = s.answers[0], s.answers[1:]
	}
	res := &result{answerInfo: answerInfo{target: p.target, label: p.label}}
	res.held = &heldAnswer{status: status, header: http.Header{}, body: []byte(`{"id":"x","choices":[]}`)}
	return routing.Outcome{Status: status, Result: res}
}

// TestPlanAttemptsHold: why a success is held is decided while planning,
// per target, from what is known then.
func TestPlanAttemptsHold(t *testing.T) {
	plain, timed, hooked, anth := testTarget(), testTarget(), testTarget(), testTarget()
	timed.RequestTimeoutMS = 10
	hooked.AfterRequestHooks = []json.RawMessage{json.RawMessage(`{"type":"guardrail"}`)}
	anth.Settings.Provider = "anthropic"
	q := cacheRequest(false, plain, timed, hooked, anth)
	planSteps(t, q, nil, nil)
	want := map[*routing.Target]holdReason{plain: 0, timed: holdDeadline, hooked: holdHooks, anth: holdTranslated}
	for tg, h := range want {
		if got := q.attemptFor(tg).hold; got != h {
			t.Errorf("%s %s: hold %b, want %b", tg.Settings.Provider, tg.Path, got, h)
		}
	}
	q = cacheRequest(false, plain)
	q.Envelope = true
	planSteps(t, q, nil, nil)
	if q.attemptFor(plain).hold != holdWhole {
		t.Error("an envelope must hold the answer whole")
	}
}

// TestCacheStepAlone: the cache step gives the next step a sink and the
// MISS label, and keys a body a before-hook changed on its own.
func TestCacheStepAlone(t *testing.T) {
	store, _ := cache.New(1<<20, time.Now)
	defer store.Close()
	tg := testTarget()
	tg.Cache = &routing.Cache{Mode: "simple"}
	q := cacheRequest(false, tg)
	rc := localCache(store)
	planSteps(t, q, rc, nil)
	next := &recordStep{}
	c := &cacheStep{next: next, rc: rc}
	ctx := context.Background()
	c.attempt(ctx, q.attemptFor(tg))
	if got := next.got[0]; got.sink == nil || got.label != cache.StatusMiss {
		t.Fatalf("sink %v label %q", got.sink, got.label)
	}
	key := q.attemptFor(tg).cache.req.Key
	p := q.attemptFor(tg)
	p.body = []byte(`{"model":"m","messages":[{"role":"user","content":"changed"}]}`)
	c.attempt(ctx, p)
	if q.attemptFor(tg).cache.req.Key == key {
		t.Fatal("a changed body must be keyed on its own")
	}
	p.body = []byte(`[1]`)
	c.attempt(ctx, p)
	if next.got[2].sink != nil {
		t.Fatal("a body that is not a JSON object must not be stored")
	}
}

// TestGuardStepAlone: a denied request never reaches the next step; a
// mutator's body is what the next step is given.
func TestGuardStepAlone(t *testing.T) {
	deny := testTarget()
	deny.BeforeRequestHooks = []json.RawMessage{json.RawMessage(`{"type":"guardrail","deny":true,"checks":[{"id":"default.contains","parameters":{"words":["secret"],"operator":"none"}}]}`)}
	mut := testTarget()
	mut.BeforeRequestHooks = []json.RawMessage{json.RawMessage(`{"type":"mutator","checks":[{"id":"default.addPrefix","parameters":{"prefix":"Be brief. "}}]}`)}
	for _, tc := range []struct {
		name       string
		target     *routing.Target
		content    string
		wantStatus int
		wantSent   string
	}{
		{"denied", deny, "the secret", guardrails.StatusDenied, ""},
		{"passed", deny, "hello", http.StatusOK, "hello"},
		{"mutated", mut, "hello", http.StatusOK, "Be brief. hello"},
	} {
		q := cacheRequest(false, tc.target)
		q.Call.Body = []byte(`{"model":"m","messages":[{"role":"user","content":"` + tc.content + `"}]}`)
		g := &Gateway{hooks: &guardrails.Runner{}}
		gs, err := g.newGuardSession(q)
		if err != nil || gs == nil {
			t.Fatalf("%s: session %v %v", tc.name, gs, err)
		}
		planSteps(t, q, nil, nil)
		next := &recordStep{}
		s := &guardStep{next: next, gs: gs}
		o := s.attempt(context.Background(), q.attemptFor(tc.target))
		if o.Status != tc.wantStatus {
			t.Fatalf("%s: status %d, want %d", tc.name, o.Status, tc.wantStatus)
		}
		if tc.wantSent == "" {
			if len(next.got) != 0 {
				t.Fatalf("%s: the provider step was called", tc.name)
			}
			continue
		}
		if len(next.got) != 1 || !strings.Contains(string(next.got[0].body), tc.wantSent) || next.got[0].guard != gs {
			t.Fatalf("%s: next got %+v", tc.name, next.got)
		}
	}
}

// overflowAdapter asks for one retry with a shorter body on a 400.
type overflowAdapter struct{ FormatAdapter }

func (overflowAdapter) Native(*routing.Target) bool { return false }
func (overflowAdapter) ToChat(_ context.Context, b []byte) ([]byte, error) {
	return []byte(`{"model":"m","messages":[]}`), nil
}
func (overflowAdapter) Overflow(status int, _ []byte, retried bool) ([]byte, *apierror.Error) {
	if status == http.StatusBadRequest && !retried {
		return []byte(`{"model":"m","messages":["short"]}`), nil
	}
	return nil, nil
}

// TestOverflowStepAlone: a translated target's overflow is retried once
// with the adapter's shorter body, which the next step is given.
func TestOverflowStepAlone(t *testing.T) {
	tg := testTarget()
	q := cacheRequest(false, tg)
	q.adapter = overflowAdapter{}
	planSteps(t, q, nil, nil)
	next := &recordStep{answers: []int{400, 400}}
	o := overflowStep{next: next, ad: q.adapter}.attempt(context.Background(), q.attemptFor(tg))
	if len(next.got) != 2 || !strings.Contains(string(next.got[1].body), "short") || o.Status != 400 {
		t.Fatalf("attempts %d, status %d", len(next.got), o.Status)
	}
	if !next.got[0].adapted || next.got[0].op != providers.OpChat {
		t.Fatalf("plan %+v", next.got[0])
	}
}
