package mcp

import (
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

func TestCallRecord(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := &Handler{logger: zap.New(core)}
	m := &message{method: methodCallTool, name: "files__read", body: []byte(`{"params":{"arguments":{"secret":"never-logged"}}}`)}
	rec := newCallRecord(&identity.Caller{Name: "ci", WorkspaceID: "ws"}, m)
	rec.Server, rec.Upstream = "files", "read"
	rec.setStatus(statusOK, 0)
	rec.finish(120)
	h.logCall(httptest.NewRequest("POST", "/mcp", nil), rec)
	entries := logs.All()
	if len(entries) != 1 || entries[0].Message != "mcp call" {
		t.Fatalf("entries %+v", entries)
	}
	got := entries[0].ContextMap()["mcp"].(map[string]any)
	want := map[string]any{"method": "tools/call", "server": "files", "tool": "read", "name": "files__read",
		"api_key_name": "ci", "workspace_id": "ws", "status": "ok", "request_bytes": int64(len(m.body)), "response_bytes": int64(120)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k, v := range got {
		if s, ok := v.(string); ok && strings.Contains(s, "never-logged") {
			t.Errorf("%s holds the arguments", k)
		}
	}
}
