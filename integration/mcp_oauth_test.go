package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeTokenServer is an OAuth 2 token endpoint for the client credentials
// grant: it checks the client's credentials and the request, and issues
// tokens tok-1, tok-2, … that stay valid until revoke.
type fakeTokenServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	issued  int
	valid   map[string]bool
	refused []string // why requests were refused
	forms   []map[string]string
}

func newFakeTokenServer(t *testing.T, clientID, secret string) *fakeTokenServer {
	f := &fakeTokenServer{valid: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", 400)
			return
		}
		id, sec, basic := r.BasicAuth()
		if !basic {
			id, sec = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.forms = append(f.forms, map[string]string{"grant_type": r.PostForm.Get("grant_type"),
			"scope": r.PostForm.Get("scope"), "resource": r.PostForm.Get("resource")})
		if id != clientID || sec != secret || r.PostForm.Get("grant_type") != "client_credentials" {
			f.refused = append(f.refused, fmt.Sprintf("client %q grant %q", id, r.PostForm.Get("grant_type")))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		f.issued++
		tok := fmt.Sprintf("tok-%d", f.issued)
		f.valid[tok] = true
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// authorized accepts a request bearing a valid token.
func (f *fakeTokenServer) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	defer f.mu.Unlock()
	return ok && f.valid[tok]
}

// revoke makes every token issued so far invalid.
func (f *fakeTokenServer) revoke() {
	f.mu.Lock()
	clear(f.valid)
	f.mu.Unlock()
}

func (f *fakeTokenServer) issuedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issued
}

// TestMCPOAuthClientCredentials: a server behind OAuth 2 gets the token
// the gateway obtained with its own client credentials (scope and RFC 8707
// resource sent) on every request, listing and call alike, never the
// caller's gateway key; one token serves many calls; a token the server
// refuses (401) is replaced and the call sent again, so the caller sees
// no failure; the client secret is never logged.
func TestMCPOAuthClientCredentials(t *testing.T) {
	const secret = "mcp-oauth-client-secret-7f3a9c"
	os.Setenv("MCP_OAUTH_SECRET", secret)
	ts := newFakeTokenServer(t, "gateway-client", secret)
	files := newFakeMCPAuth(t, false, ts.authorized, fakeTool{name: "read"})
	loadFresh(t, mcpSite(t, mcpServerBlock("files", files.URL, "allow test", fmt.Sprintf(`oauth_client_credentials {
				token_url %s/token
				client_id gateway-client
				client_secret {env.MCP_OAUTH_SECRET}
				scopes tools.read tools.call
				resource %s
			}`, ts.srv.URL, files.URL)), "egress_allow loopback"))
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	call := func(n int) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"n": n}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", n, err, res)
		}
	}
	for i := range 3 {
		call(i)
	}
	if n := ts.issuedCount(); n != 1 {
		t.Fatalf("%d tokens obtained for 3 calls, want 1", n)
	}
	ts.revoke()
	call(3)
	if n := ts.issuedCount(); n != 2 {
		t.Fatalf("%d tokens obtained after the server refused the first, want 2", n)
	}
	if got := len(files.calledTools()); got != 4 {
		t.Fatalf("the server ran %d calls, want 4", got)
	}
	ts.mu.Lock()
	for _, f := range ts.forms {
		if f["grant_type"] != "client_credentials" || f["scope"] != "tools.read tools.call" || f["resource"] != files.URL {
			t.Errorf("token request %v", f)
		}
	}
	if len(ts.refused) > 0 {
		t.Errorf("token requests refused: %v", ts.refused)
	}
	ts.mu.Unlock()
	for _, h := range files.seenHeaders() {
		a := h.Get("Authorization")
		if strings.Contains(strings.Join(h.Values("Authorization"), " ")+h.Get("X-Gateway-Api-Key"), gatewayKey) {
			t.Fatalf("the caller's gateway key reached the server: %v", h)
		}
		switch a {
		case "Bearer tok-1", "Bearer tok-2":
		default:
			t.Fatalf("a request to the server had Authorization %q", a)
		}
	}
	for _, l := range gatewayLogLines(t) {
		if strings.Contains(l, secret) || strings.Contains(l, "tok-1") {
			t.Fatalf("a credential in the log: %s", l)
		}
	}
}
