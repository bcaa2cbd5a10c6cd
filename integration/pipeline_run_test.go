package integration

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"
)

// runGateway is llm_gateway under a module id of its own, so a test can
// reach the provisioned handler and call Gateway.Run on it, as managed
// batches do.
type runGateway struct {
	handlers.Gateway
}

func (runGateway) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_gateway_run", New: func() caddy.Module { return new(runGateway) }}
}

var (
	runMu       sync.Mutex
	runInstance *handlers.Gateway
)

func (s *runGateway) Provision(ctx caddy.Context) error {
	if err := s.Gateway.Provision(ctx); err != nil {
		return err
	}
	runMu.Lock()
	runInstance = &s.Gateway
	runMu.Unlock()
	return nil
}

func init() { caddy.RegisterModule(runGateway{}) }

// loadRunSite loads a site whose llm_gateway is runGateway.
func loadRunSite(t *testing.T) {
	t.Helper()
	newHTTPPort()
	cfg, err := adapt(site{}.caddyfile())
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.ReplaceAll(cfg, []byte(`"handler":"llm_gateway"`), []byte(`"handler":"llm_gateway_run"`))
	truncateLog()
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	settleReload()
}

// TestPipelineRunWithoutClient runs requests through Gateway.Run, as
// managed batches will: the answer comes back in memory, errors in the
// envelope, and the request is logged once.
func TestPipelineRunWithoutClient(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRunSite(t)
	runMu.Lock()
	g := runInstance
	runMu.Unlock()
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
	for _, l := range runLogLines(t) {
		if strings.Contains(l, "run-trace-1") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("want one log line per Run with the trace id, got %d", n)
	}
}

// runLogLines returns the staged gateway's request entries.
func runLogLines(t *testing.T) []string {
	var out []string
	for _, l := range strings.Split(readLog(t), "\n") {
		if strings.Contains(l, `"logger":"http.handlers.llm_gateway_run"`) && strings.Contains(l, `"msg":"llm request"`) {
			out = append(out, l)
		}
	}
	return out
}
