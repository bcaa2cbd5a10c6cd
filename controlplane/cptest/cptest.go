// Package cptest runs one management API module alone for its package's
// tests: an llm app loaded in this process's Caddy (Caddy's file storage
// and the embedded SQLite ledger, both in the test's temporary
// directory; no listener), whose router holds only the module under
// test, and a handful of gateway keys across two organisations. A call
// goes the way llm_api takes it (app.Identify, then the router) and is
// answered into an httptest.ResponseRecorder.
package cptest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	// Caddy's file storage, where the records are kept on one instance.
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	// The providers a virtual key or config may name.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/all"
)

// Tenants of the keys Env declares.
const (
	Org        = "0b6f3e70-3c4a-4a59-9a51-6f7d7a1e2b01"
	Workspace  = "1c7a4f81-4d5b-4b6a-8b62-7a8e8b2f3c02"
	Workspace2 = "2d8b5a92-5e6c-4c7b-9c73-8b9f9c3a4d03" // another workspace of Org
	OtherOrg   = "3e9c6ba3-6f7d-4d8c-8d84-9caf0d4b5e04"
	OtherWS    = "4fad7cb4-708e-4e9d-9e95-adb01e5c6f05" // OtherOrg's workspace
)

// Gateway keys Env declares (the secrets are the names: tests only).
const (
	// Admin is an organisation key of Org with every scope.
	Admin = "cptest-admin"
	// Member is a workspace key of Org's Workspace with every scope.
	Member = "cptest-member"
	// Member2 is a workspace key of Workspace2 with every scope.
	Member2 = "cptest-member2"
	// Reader is a workspace key of Workspace that may only call models.
	Reader = "cptest-reader"
	// Outsider is an organisation key of OtherOrg with every scope.
	Outsider = "cptest-outsider"
)

// Env is one llm app serving one API module.
type Env struct {
	App *app.App
}

// mu keeps one Env loaded at a time: Caddy runs one config per process.
var mu sync.Mutex

// New loads an llm app whose router serves module (its ID's last part:
// "keys", "usage_limits", "ledger", …) with the given module settings,
// and stops it when the test ends. extra are more llm app members, such
// as "prompts".
func New(t testing.TB, module string, extra map[string]any) *Env {
	t.Helper()
	mu.Lock()
	dir := t.TempDir()
	key := func(name, ws, org, typ string, scopes ...string) map[string]any {
		d := sha256.Sum256([]byte(name))
		k := map[string]any{"name": name, "key": "sha256:" + hex.EncodeToString(d[:]), "workspace_id": ws, "organisation_id": org, "type": typ}
		if len(scopes) > 0 {
			k["scopes"] = scopes
		}
		return k
	}
	llm := map[string]any{
		"api_keys": []any{
			key(Admin, Workspace, Org, "organisation", "*"),
			key(Member, Workspace, Org, "workspace"),
			key(Member2, Workspace2, Org, "workspace"),
			key(Reader, Workspace, Org, "workspace", "completions.write"),
			key(Outsider, OtherWS, OtherOrg, "organisation", "*"),
		},
		"keys":   map[string]any{"encryption_key": strings.Repeat("6f", 32)},
		"ledger": map[string]any{"dsn": filepath.Join(dir, "ledger.db"), "spool_dir": "off"},
		"api":    map[string]any{module: map[string]any{}},
	}
	for k, v := range extra {
		llm[k] = v
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(dir, "storage")},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps":    map[string]any{"llm": llm},
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(raw, true); err != nil {
		mu.Unlock()
		t.Fatalf("loading the llm app: %v", err)
	}
	t.Cleanup(func() {
		_ = caddy.Stop()
		mu.Unlock()
	})
	a, err := app.Get(caddy.ActiveContext())
	if err != nil {
		t.Fatal(err)
	}
	return &Env{App: a}
}

// Do sends one call with key as the gateway key (none when empty).
func (e *Env) Do(key, method, path, body string) *httptest.ResponseRecorder {
	return e.DoHeader(key, method, path, body, nil)
}

// DoHeader is Do with more request headers (If-Match, Idempotency-Key).
func (e *Env) DoHeader(key, method, path, body string, h http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range h {
		r.Header[k] = v
	}
	if key != "" {
		r.Header.Set("x-gateway-api-key", key)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	rt := e.App.ControlPlane()
	if !rt.Owns(method, r.URL.Path) {
		apierror.Write(w, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown endpoint"))
		return w
	}
	presented := ingress.GatewayKey(r.Header)
	id, ok := e.App.Identify(r.Context(), presented)
	if !ok {
		apierror.Write(w, e.App.AuthError(presented))
		return w
	}
	rt.Serve(w, r, id, []byte(body))
	return w
}

// Case is one call of a table test and what it must answer.
type Case struct {
	Name               string
	Key                string
	Method, Path, Body string
	// Header are more request headers, when set.
	Header http.Header
	Status int
	// ETag is the ETag the answer must carry, when set.
	ETag string
	// Code is the error code the answer must carry, when set.
	Code string
	// Contains must be in the answer's body, when set.
	Contains string
	// Lacks must not be in the answer's body, when set.
	Lacks string
}

// Run runs cases in order (they may build on each other's records).
func (e *Env) Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		w := e.DoHeader(c.Key, c.Method, c.Path, c.Body, c.Header)
		body := w.Body.String()
		switch {
		case w.Code != c.Status:
			t.Errorf("%s: %s %s as %s: status %d, want %d: %s", c.Name, c.Method, c.Path, c.Key, w.Code, c.Status, body)
		case c.Code != "" && !strings.Contains(body, `"code":"`+c.Code+`"`):
			t.Errorf("%s: body %s, want code %s", c.Name, body, c.Code)
		case c.Contains != "" && !strings.Contains(body, c.Contains):
			t.Errorf("%s: body %s, want %s in it", c.Name, body, c.Contains)
		case c.ETag != "" && w.Header().Get("ETag") != c.ETag:
			t.Errorf("%s: ETag %q, want %q", c.Name, w.Header().Get("ETag"), c.ETag)
		case c.Lacks != "" && strings.Contains(body, c.Lacks):
			t.Errorf("%s: body %s holds %s", c.Name, body, c.Lacks)
		case w.Code >= 400 && w.Header().Get("x-gateway-error") != "true":
			t.Errorf("%s: an error outside the gateway's envelope", c.Name)
		}
	}
}

// Field decodes member name of a JSON answer as a string ("" when absent).
func Field(w *httptest.ResponseRecorder, name string) string {
	var m map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	s, _ := m[name].(string)
	return s
}
