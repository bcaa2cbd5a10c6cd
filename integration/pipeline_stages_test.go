package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// stagedGateway is llm_gateway with test stages, the way a guardrails or
// Responses module plugs its stages in: it sets Gateway.Stages.
type stagedGateway struct {
	handlers.Gateway
}

func (stagedGateway) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_gateway_staged", New: func() caddy.Module { return new(stagedGateway) }}
}

var (
	stagedMu       sync.Mutex
	stagedInstance *handlers.Gateway
	stagedStages   *handlers.Stages
)

func (s *stagedGateway) Provision(ctx caddy.Context) error {
	if err := s.Gateway.Provision(ctx); err != nil {
		return err
	}
	s.Gateway.Stages = stageFunc(func(*handlers.Request) *handlers.Stages {
		stagedMu.Lock()
		defer stagedMu.Unlock()
		return stagedStages
	})
	stagedMu.Lock()
	stagedInstance = &s.Gateway
	stagedMu.Unlock()
	return nil
}

func init() { caddy.RegisterModule(stagedGateway{}) }

type stageFunc func(*handlers.Request) *handlers.Stages

func (f stageFunc) Stages(q *handlers.Request) *handlers.Stages { return f(q) }

type before func(q *handlers.Request) ([]byte, error)

func (b before) Before(_ context.Context, q *handlers.Request) ([]byte, error) { return b(q) }

type after struct {
	deny bool
	mu   sync.Mutex
	seen []*handlers.Answer
}

func (a *after) Async() bool { return false }
func (a *after) After(_ context.Context, _ *handlers.Request, ans *handlers.Answer) ([]zap.Field, error) {
	a.mu.Lock()
	a.seen = append(a.seen, ans)
	a.mu.Unlock()
	if a.deny && strings.Contains(string(ans.Body), "Hello") {
		return []zap.Field{zap.String("verdict", "denied")}, apierror.New(http.StatusUnprocessableEntity, apierror.TypeInvalidRequest, "answer refused by a check")
	}
	return []zap.Field{zap.String("verdict", "passed")}, nil
}

// upperAdapter is a toy format: {"q": "..."} in, {"a": "..."} out, for
// every target.
type upperAdapter struct{}

func (upperAdapter) Native(*routing.Target) bool { return false }

func (upperAdapter) ToChat(_ context.Context, body []byte) ([]byte, error) {
	q := string(bytes.TrimSuffix(bytes.TrimPrefix(body, []byte(`{"q":"`)), []byte(`"}`)))
	return []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + q + `"}]}`), nil
}

func (upperAdapter) Overflow(int, []byte, bool) ([]byte, *apierror.Error) { return nil, nil }

func (upperAdapter) FromChat(_ context.Context, chat []byte) ([]byte, error) {
	i := bytes.Index(chat, []byte(`"content":"`))
	if i < 0 {
		return nil, errors.New("no content")
	}
	rest := chat[i+11:]
	return []byte(`{"a":"` + string(rest[:bytes.IndexByte(rest, '"')]) + `"}`), nil
}

func (upperAdapter) Stream(_ context.Context, w io.Writer) handlers.AdaptedStream {
	return nopCloser{w}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close(error) error { return nil }

// loadStaged loads a site whose llm_gateway is the staged one.
func loadStaged(t *testing.T, st *handlers.Stages) {
	t.Helper()
	stagedMu.Lock()
	stagedStages = st
	stagedMu.Unlock()
	newHTTPPort()
	cfg, err := adapt(site{}.caddyfile())
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.ReplaceAll(cfg, []byte(`"handler":"llm_gateway"`), []byte(`"handler":"llm_gateway_staged"`))
	truncateLog()
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	settleReload()
}

// TestPipelineStages: a before-request check transforms and denies, an
// after-request check annotates and denies a held answer, and a format
// adapter serves a chat completion in another shape.
func TestPipelineStages(t *testing.T) {
	up := newFakeOpenAI(t)
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	chatReq := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)

	t.Run("before transforms", func(t *testing.T) {
		loadStaged(t, &handlers.Stages{Before: []handlers.BeforeCheck{before(func(q *handlers.Request) ([]byte, error) {
			return bytes.Replace(q.Call.Body, []byte(`"hi"`), []byte(`"redacted"`), 1), nil
		})}})
		resp, raw := do(t, "POST", "/chat/completions", chatReq, hdr...)
		if resp.StatusCode != 200 || !strings.Contains(string(up.last().Body), "redacted") {
			t.Fatalf("%d %s; upstream got %s", resp.StatusCode, raw, up.last().Body)
		}
	})
	t.Run("before denies", func(t *testing.T) {
		n := up.count()
		loadStaged(t, &handlers.Stages{Before: []handlers.BeforeCheck{before(func(*handlers.Request) ([]byte, error) {
			return nil, apierror.New(http.StatusForbidden, apierror.TypeInvalidRequest, "blocked by a check")
		})}})
		resp, raw := do(t, "POST", "/chat/completions", chatReq, hdr...)
		if resp.StatusCode != 403 || !strings.Contains(string(raw), "blocked by a check") || up.count() != n {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
	})
	t.Run("after denies and annotates", func(t *testing.T) {
		a := &after{deny: true}
		loadStaged(t, &handlers.Stages{After: []handlers.AfterCheck{a}})
		resp, raw := do(t, "POST", "/chat/completions", chatReq, hdr...)
		if resp.StatusCode != 422 || strings.Contains(string(raw), "Hello") {
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		if len(a.seen) != 1 || a.seen[0].Provider != "openai" || a.seen[0].Usage == nil {
			t.Fatalf("the check saw %+v", a.seen)
		}
		lines := stagedLogLines(t)
		if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"verdict":"denied"`) {
			t.Fatalf("annotation not logged: %v", lines)
		}
	})
	t.Run("adapter", func(t *testing.T) {
		loadStaged(t, &handlers.Stages{Adapter: upperAdapter{}})
		resp, raw := do(t, "POST", "/responses", []byte(`{"q":"hi"}`), hdr...)
		if resp.StatusCode != 200 || !strings.HasPrefix(string(raw), `{"a":"`) || up.last().Path != "/v1/chat/completions" {
			t.Fatalf("%d %s (upstream path %s)", resp.StatusCode, raw, up.last().Path)
		}
	})
}

// TestPipelineRunWithoutClient runs requests through Gateway.Run, as
// managed batches will: the answer comes back in memory, errors in the
// envelope, and the request is logged once.
func TestPipelineRunWithoutClient(t *testing.T) {
	up := newFakeOpenAI(t)
	loadStaged(t, nil)
	stagedMu.Lock()
	g := stagedInstance
	stagedMu.Unlock()
	h := http.Header{"X-Gateway-Api-Key": {gatewayKey}, "X-Gateway-Provider": {"openai"}, "X-Gateway-Custom-Host": {up.URL},
		"Authorization": {"Bearer sk-test-provider"}, "Content-Type": {"application/json"}, "X-Gateway-Trace-Id": {"run-trace-1"}}
	tests := []struct {
		name   string
		in     handlers.Input
		status int
		want   string
	}{
		{"chat", handlers.Input{Path: "/v1/chat/completions", Header: h, Body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)}, 200, `"choices"`},
		{"bad body", handlers.Input{Path: "/v1/chat/completions", Header: h, Body: []byte(`[`)}, 400, `"error"`},
		{"no key", handlers.Input{Path: "/v1/chat/completions", Body: []byte(`{}`)}, 401, `invalid_api_key`},
	}
	for _, tt := range tests {
		res, err := g.Run(context.Background(), &tt.in)
		if err != nil || res.Status != tt.status || !strings.Contains(string(res.Body), tt.want) {
			t.Fatalf("%s: %v %+v %s", tt.name, err, res, res.Body)
		}
		if tt.status == 200 && (res.Provider != "openai" || res.Usage == nil || res.TraceID != "run-trace-1") {
			t.Fatalf("%s: %+v", tt.name, res)
		}
	}
	n := 0
	for _, l := range stagedLogLines(t) {
		if strings.Contains(l, "run-trace-1") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("want one log line per Run with the trace id, got %d", n)
	}
}

// stagedLogLines returns the staged gateway's request entries.
func stagedLogLines(t *testing.T) []string {
	var out []string
	for _, l := range strings.Split(readLog(t), "\n") {
		if strings.Contains(l, `"logger":"http.handlers.llm_gateway_staged"`) && strings.Contains(l, `"msg":"llm request"`) {
			out = append(out, l)
		}
	}
	return out
}
