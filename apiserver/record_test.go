package apiserver

import (
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
	// The module the calls are served by.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/keys/keysapi"
)

// TestRecordsManagementCalls: every call llm_api answers, served or
// refused before the router, is recorded once as llm_gateway records a
// management call: operation "control", the caller's key and workspace
// when it authenticated, the status answered, and never the key itself.
func TestRecordsManagementCalls(t *testing.T) {
	e := cp.New(t, "keys", nil)
	core, logs := observer.New(zapcore.InfoLevel)
	h := &Handler{app: e.App, router: e.App.ControlPlane(), logger: zap.New(core)}
	for _, tc := range []struct {
		name, key, method, path, body string
		status                        int
		keyName                       string
	}{
		{"served", cp.Member, "GET", "/v1/api-keys", "", 200, cp.Member},
		{"created", cp.Member, "POST", "/v1/api-keys/workspace/service", `{"name":"svc","scopes":["completions.write"]}`, 200, cp.Member},
		{"refused by the router", cp.Reader, "GET", "/v1/api-keys", "", 403, cp.Reader},
		{"unknown key", "gw-nope", "GET", "/v1/api-keys", "", 401, ""},
		{"not a management path", cp.Member, "POST", "/v1/chat/completions", `{}`, 404, ""},
		{"body too large", cp.Member, "POST", "/v1/configs", strings.Repeat(" ", 1<<20+1), 413, cp.Member},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			r.Header.Set("x-gateway-api-key", tc.key)
			w := httptest.NewRecorder()
			if err := h.ServeHTTP(w, r, nil); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			entries := logs.TakeAll()
			if len(entries) != 1 || entries[0].Message != "llm request" {
				t.Fatalf("%d log entries, want one llm request: %v", len(entries), entries)
			}
			f := entries[0].ContextMap()
			if f["endpoint"] != "control" || f["status"] != int64(tc.status) || f["method"] != tc.method || f["path"] != strings.TrimPrefix(tc.path, "/v1") {
				t.Fatalf("entry %v", f)
			}
			if f["api_key_name"] != tc.keyName {
				t.Fatalf("api_key_name %v, want %q", f["api_key_name"], tc.keyName)
			}
			for k, v := range f {
				if s, ok := v.(string); ok && strings.Contains(s, "gw-nope") {
					t.Fatalf("field %s holds the presented key", k)
				}
			}
		})
	}
}
