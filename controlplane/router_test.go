package controlplane

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// testModule is a module of the routes given.
type testModule struct {
	id     string
	routes []Route
}

func (m testModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(Namespace + "." + m.id), New: func() caddy.Module { return m }}
}
func (m testModule) Routes() []Route { return m.routes }

func ok(*Call) (any, error) { return map[string]string{"ok": "yes"}, nil }

func TestBuildRefusesBadRoutes(t *testing.T) {
	tests := []struct {
		name string
		mods []Module
	}{
		{"no handler", []Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/x"}}}}},
		{"unknown method", []Module{testModule{"a", []Route{{Method: "FETCH", Path: "/v1/x", Handler: ok}}}}},
		{"lower-case method", []Module{testModule{"a", []Route{{Method: "get", Path: "/v1/x", Handler: ok}}}}},
		{"not under /v1/", []Module{testModule{"a", []Route{{Method: "GET", Path: "/admin/x", Handler: ok}}}}},
		{"space in path", []Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/x y", Handler: ok}}}}},
		{"bad pattern", []Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/{x", Handler: ok}}}}},
		{"twice in one module", []Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/x", Handler: ok}, {Method: "GET", Path: "/v1/x", Handler: ok}}}}},
		{"twice across modules", []Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/x", Handler: ok}}}, testModule{"b", []Route{{Method: "GET", Path: "/v1/x", Handler: ok}}}}},
		{"conflicting wildcards", []Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/x/{id}", Handler: ok}, {Method: "GET", Path: "/v1/x/{slug}", Handler: ok}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if rt, err := Build(tt.mods, Options{}); err == nil || rt != nil {
				t.Fatalf("built: %v", err)
			}
		})
	}
	if _, err := Build([]Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/x/{id}", Handler: ok}, {Method: "PUT", Path: "/v1/x/{slug}", Handler: ok}}}}, Options{}); err != nil {
		t.Fatalf("wildcards named differently on other methods: %v", err)
	}
}

func TestRouterOwns(t *testing.T) {
	rt, err := Build([]Module{testModule{"a", []Route{{Method: "GET", Path: "/v1/things/{id}", Handler: ok}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"/v1/things": true, "/v1/things/1": true, "/v1/things/1/x": true,
		"/v1/thingsx": false, "/v1/chat/completions": false,
		"/v1/labels":   true,  // unserved
		"/v1/feedback": false, // not loaded
	} {
		if got := rt.Owns("GET", path); got != want {
			t.Errorf("Owns(%s) = %v, want %v", path, got, want)
		}
	}
	if (*Router)(nil).Owns("GET", "/v1/things") {
		t.Error("a nil router owns a path")
	}
}

type storeDown struct{}

func (storeDown) Error() string { return "dial tcp 10.0.0.1:6379: secret host" }

type mapper struct{ testModule }

func (mapper) MapError(err error) *apierror.Error {
	if err == keys.ErrNotFound {
		return apierror.New(http.StatusNotFound, apierror.TypeNotFound, "no such thing")
	}
	return nil
}

type auditLog []string

func (a *auditLog) Audit(_ context.Context, actor *identity.Caller, action, typ, id, ws, org string, fields []string) {
	*a = append(*a, actor.Name+" "+action+" "+typ+" "+id+" "+ws)
}

type orgs map[string]string

func (o orgs) ForeignOrganisation(ws, own string) (string, bool) {
	org, ok := o[ws]
	return org, ok && org != own
}

// TestRouter: routes × caller scopes × tenancy through the one router.
func TestRouter(t *testing.T) {
	var log auditLog
	mod := mapper{testModule{"t", []Route{
		{Method: "GET", Path: "/v1/things/{id}", Scope: "things.read", Handler: func(c *Call) (any, error) {
			switch c.PathValue("id") {
			case "missing":
				return nil, keys.ErrNotFound
			case "down":
				return nil, storeDown{}
			}
			return map[string]string{"id": c.PathValue("id")}, nil
		}},
		{Method: "POST", Path: "/v1/things", Scope: "things.create", Status: http.StatusCreated, Handler: func(c *Call) (any, error) {
			var b struct {
				WorkspaceID string `json:"workspace_id"`
			}
			if err := c.Decode(&b); err != nil {
				return nil, err
			}
			ws, err := c.Workspace(b.WorkspaceID)
			if err != nil {
				return nil, err
			}
			c.Audit("thing.create", "thing", "t1", ws, c.Caller.OrganisationID, []string{"workspace_id"})
			return json.RawMessage(`{"workspace_id":"` + ws + `"}`), nil
		}},
	}}}
	rt, err := Build([]Module{mod}, Options{Auditor: &log, Workspaces: orgs{"ws-other": "org-other", "ws-2": "org-1"}})
	if err != nil {
		t.Fatal(err)
	}
	reader := &identity.Caller{Name: "reader", WorkspaceID: "ws-1", OrganisationID: "org-1", Type: keys.TypeWorkspace, Scopes: []string{"things.read"}}
	writer := &identity.Caller{Name: "writer", WorkspaceID: "ws-1", OrganisationID: "org-1", Type: keys.TypeWorkspace, Scopes: []string{"things.*"}}
	noScope := &identity.Caller{Name: "none", WorkspaceID: "ws-1", OrganisationID: "org-1", Type: keys.TypeWorkspace, Scopes: []string{"other.read"}}
	orgKey := &identity.Caller{Name: "org", WorkspaceID: "ws-1", OrganisationID: "org-1", Type: keys.TypeOrganisation, Scopes: []string{"things.*"}}
	tests := []struct {
		name         string
		caller       *identity.Caller
		method, path string
		body         string
		status       int
		code, want   string
	}{
		{"read", reader, "GET", "/v1/things/a", "", 200, "", `{"id":"a"}`},
		{"missing is the module's 404", reader, "GET", "/v1/things/missing", "", 404, "", "no such thing"},
		{"store failure is 503 and hidden", reader, "GET", "/v1/things/down", "", 503, "", "store is unavailable"},
		{"scope before lookup", noScope, "GET", "/v1/things/missing", "", 403, "missing_scope", ""},
		{"create needs its scope", reader, "POST", "/v1/things", `{}`, 403, "missing_scope", ""},
		{"create", writer, "POST", "/v1/things", `{}`, 201, "", `"ws-1"`},
		{"own workspace named", writer, "POST", "/v1/things", `{"workspace_id":"ws-1"}`, 201, "", `"ws-1"`},
		{"workspace key, other workspace", writer, "POST", "/v1/things", `{"workspace_id":"ws-2"}`, 403, "workspace_forbidden", ""},
		{"org key, own organisation's workspace", orgKey, "POST", "/v1/things", `{"workspace_id":"ws-2"}`, 201, "", `"ws-2"`},
		{"org key, other organisation's workspace", orgKey, "POST", "/v1/things", `{"workspace_id":"ws-other"}`, 403, "workspace_forbidden", ""},
		{"duplicate member", writer, "POST", "/v1/things", `{"workspace_id":"ws-1","workspace_\u0069d":"ws-2"}`, 400, "", "workspace_id"},
		{"not an object", writer, "POST", "/v1/things", `[1]`, 400, "", ""},
		{"wrong method", writer, "DELETE", "/v1/things/a", "", 405, "", ""},
		{"unknown", writer, "GET", "/v1/things/a/b", "", 404, "", "unknown endpoint"},
		{"no caller", nil, "GET", "/v1/things/a", "", 401, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			rt.Serve(w, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)), tt.caller, []byte(tt.body))
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.code != "" && !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) {
				t.Fatalf("body %s, want code %s", w.Body, tt.code)
			}
			if !strings.Contains(w.Body.String(), tt.want) || strings.Contains(w.Body.String(), "secret host") {
				t.Fatalf("body %s, want %s", w.Body, tt.want)
			}
			if w.Code >= 400 && w.Header().Get("x-gateway-error") != "true" {
				t.Fatal("error not in the gateway's envelope")
			}
		})
	}
	if len(log) != 3 || log[0] != "writer thing.create thing t1 ws-1" || log[2] != "org thing.create thing t1 ws-2" {
		t.Fatalf("audit log %q", log)
	}
}

// TestNotLoadedClaimed: a registered module left out of a config is still
// claimed (never a provider's call), answered 404, and leaves a loaded
// module sharing its first segments its 405s.
func TestNotLoadedClaimed(t *testing.T) {
	left := testModule{"left", []Route{{Method: "GET", Path: "/v1/policies/usage-limits/{id}", Handler: ok}, {Method: "GET", Path: "/v1/policies/usage-limits", Handler: ok}}}
	loaded := testModule{"loaded", []Route{{Method: "GET", Path: "/v1/policies/rate-limits", Handler: ok}}}
	rt, err := Build([]Module{loaded}, Options{NotLoaded: Prefixes(left.Routes())})
	if err != nil {
		t.Fatal(err)
	}
	caller := &identity.Caller{Name: "k"}
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/policies/usage-limits", 404},
		{"GET", "/v1/policies/usage-limits/x", 404},
		{"GET", "/v1/policies/rate-limits", 200},
		{"POST", "/v1/policies/rate-limits", 405},
	} {
		if !rt.Owns(tt.method, tt.path) {
			t.Fatalf("%s not owned", tt.path)
		}
		w := httptest.NewRecorder()
		rt.Serve(w, httptest.NewRequest(tt.method, tt.path, nil), caller, nil)
		if w.Code != tt.status {
			t.Errorf("%s %s: %d, want %d: %s", tt.method, tt.path, w.Code, tt.status, w.Body)
		}
	}
}
