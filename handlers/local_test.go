package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// TestLocalDispatch: the dispatcher claims the gateway's own APIs (the
// control plane, its file store) and nothing that is routed to a
// provider: inference, a prompt completion under the prompts prefix,
// provider files, a response id the gateway did not store.
func TestLocalDispatch(t *testing.T) {
	// A control-plane API, as an API module declares its routes.
	rt, err := controlplane.Build([]controlplane.Module{localTestAPI{}}, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{app: &app.App{}, management: rt, configs: routing.NewConfigCache(8)}
	gatewayFile := files.IDPrefix + strings.Repeat("ab", 16)
	tests := []struct {
		name, method, path string
		op                 providers.Operation // the parsed call's, when parse rewrote it
		header             ingress.Headers
		want               providers.Operation // "" when routed
		wantErr            bool
	}{
		{name: "chat", method: "POST", path: "/v1/chat/completions", want: ""},
		{name: "control plane", method: "GET", path: "/v1/local-test/x", want: opControl},
		{name: "control plane, wrong method", method: "POST", path: "/v1/local-test/x", want: opControl},
		{name: "inference under a control-plane prefix", method: "POST", path: "/v1/local-test/p1/completions", op: providers.OpChat, want: ""},
		{name: "prompt completion", method: "POST", path: "/v1/prompts/p1/completions", op: providers.OpChat, want: ""},
		{name: "gateway file", method: "GET", path: "/v1/files/" + gatewayFile, want: "files"},
		{name: "provider file", method: "GET", path: "/v1/files/file-abc", header: ingress.Headers{Provider: "openai"}, want: ""},
		{name: "files list without a provider", method: "GET", path: "/v1/files", want: "files"},
		{name: "fine-tuning without a provider", method: "GET", path: "/v1/fine_tuning/jobs", wantErr: true},
		{name: "stored response, no store", method: "GET", path: "/v1/responses/resp_1", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			path := strings.TrimPrefix(tt.path, "/v1")
			hdr := tt.header
			q := &Request{Header: &hdr, RouteHeader: &hdr, Identity: &identity.Caller{Name: "k", WorkspaceID: "w"}, URLPath: tt.path}
			q.Call = providers.Call{Op: providers.OperationFor(tt.method, path), Method: tt.method, Path: path}
			if tt.op != "" {
				q.Call.Op = tt.op
			}
			a, err := g.local(r, q)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v", err)
			}
			got := providers.Operation("")
			if a != nil {
				got = a.op
				if (a.serve == nil) == (a.held == nil) {
					t.Fatalf("a local answer is served or held, not both or neither: %+v", a)
				}
			}
			if got != tt.want {
				t.Fatalf("answered as %q, want %q", got, tt.want)
			}
		})
	}
}

// localTestAPI is a management API module of one route.
type localTestAPI struct{}

func (localTestAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".local_test", New: func() caddy.Module { return localTestAPI{} }}
}

func (localTestAPI) Routes() []controlplane.Route {
	return []controlplane.Route{{Method: "GET", Path: "/v1/local-test/{id}", Handler: func(*controlplane.Call) (any, error) { return nil, nil }}}
}

// TestManagementOff: with management off the route answers the management
// API's paths 404 itself; nothing is served, nothing routed.
func TestManagementOff(t *testing.T) {
	rt, err := controlplane.Build([]controlplane.Module{localTestAPI{}}, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []bool{false, true} {
		g := &Gateway{app: &app.App{}, management: rt, configs: routing.NewConfigCache(8), ManagementOff: off}
		for _, path := range []string{"/v1/local-test/x", "/v1/labels"} {
			r := httptest.NewRequest("GET", path, nil)
			q := &Request{Header: &ingress.Headers{}, RouteHeader: &ingress.Headers{}, Identity: &identity.Caller{Name: "k"}, URLPath: path}
			q.Call = providers.Call{Op: providers.OpProxy, Method: "GET", Path: strings.TrimPrefix(path, "/v1")}
			a, err := g.local(r, q)
			switch {
			case off && (a != nil || apierror.As(err).Status != http.StatusNotFound):
				t.Fatalf("management off, %s: answer %v, error %v", path, a, err)
			case !off && (a == nil || a.op != opControl || err != nil):
				t.Fatalf("management on, %s: answer %v, error %v", path, a, err)
			}
		}
	}
}

// TestWriteLocal: a local answer reaches the client through the
// responder, with the gateway's trace id.
func TestWriteLocal(t *testing.T) {
	tests := []struct {
		name string
		a    *localAnswer
		code int
		body string
	}{
		{"held", &localAnswer{held: &heldAnswer{status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(`{"ok":1}`)}}, 200, `{"ok":1}`},
		{"served", &localAnswer{serve: func(w http.ResponseWriter) { w.WriteHeader(404); _, _ = w.Write([]byte("no")) }}, 404, "no"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		f := &flight{}
		f.out.w, f.out.traceID = rec, "tr-1"
		f.writeLocal(tt.a)
		if rec.Code != tt.code || rec.Body.String() != tt.body || f.out.status != tt.code || rec.Header().Get("X-Gateway-Trace-Id") != "tr-1" {
			t.Fatalf("%s: %d %q status %d headers %v", tt.name, rec.Code, rec.Body, f.out.status, rec.Header())
		}
	}
}
