package app

import (
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

func TestCaddyfileMCPOAuth(t *testing.T) {
	block := func(body string) string {
		return "{\n\tadmin off\n\tllm {\n\t\tmcp_server files {\n\t\t\turl https://mcp.example.com/mcp\n\t\t\toauth_client_credentials {\n" + body + "\n\t\t\t}\n\t\t}\n\t}\n}\n:0 {\n\trespond ok\n}\n"
	}
	cfg, err := adapt(t, block("token_url https://idp.example.com/token\nclient_id gw\nclient_secret {env.S}\nscopes a b\nscopes c\nresource https://mcp.example.com/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	o := gjson.GetBytes(cfg, "apps.llm.mcp_servers.0.oauth_client_credentials")
	for path, want := range map[string]string{"token_url": "https://idp.example.com/token", "client_id": "gw",
		"client_secret": "{env.S}", "scopes.2": "c", "resource": "https://mcp.example.com/mcp"} {
		if got := o.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q (%s)", path, got, want, o.Raw)
		}
	}
	for _, tc := range []struct{ body, wantErr string }{
		{"token_url https://idp/token\nclient_id gw", "are required"},
		{"token_url https://idp/token\nclient_id gw\nclient_secret s\ngrant password", `unknown oauth_client_credentials option "grant"`},
		{"token_url https://idp/token\nclient_id gw\nclient_secret s\nscopes", "wrong argument count"},
	} {
		if _, err := adapt(t, block(tc.body)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: err %v, want %q", tc.body, err, tc.wantErr)
		}
	}
}

func TestProvisionMCPOAuth(t *testing.T) {
	os.Setenv("MCP_OAUTH_TEST_SECRET", "sec-1")
	ok := MCPOAuth{TokenURL: "https://idp.example.com/token", ClientID: "gw", ClientSecret: "{env.MCP_OAUTH_TEST_SECRET}",
		Scopes: []string{"a"}, Resource: "https://mcp.example.com/mcp"}
	tests := []struct {
		name    string
		mutate  func(*MCPServer)
		wantErr string
	}{
		{"valid", func(*MCPServer) {}, ""},
		{"beside bearer", func(s *MCPServer) { s.Bearer = "x" }, "both given"},
		{"beside an Authorization header", func(s *MCPServer) { s.Headers = map[string]string{"Authorization": "x"} }, "both given"},
		{"token URL not http", func(s *MCPServer) { s.OAuth.TokenURL = "file:///etc/passwd" }, "token_url must be"},
		{"token URL with credentials", func(s *MCPServer) { s.OAuth.TokenURL = "https://u:p@idp/token" }, "token_url must be"},
		{"empty secret", func(s *MCPServer) { s.OAuth.ClientSecret = "{env.MCP_OAUTH_TEST_UNSET}" }, "is empty"},
		{"relative resource", func(s *MCPServer) { s.OAuth.Resource = "/mcp" }, "absolute URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			s := MCPServer{Name: "files", URL: "https://mcp.example.com/mcp", Allow: []string{"*"}, OAuth: &o}
			tt.mutate(&s)
			a := &App{logger: zap.NewNop()}
			a.MCPServers = []MCPServer{s}
			err := a.provisionMCP(caddy.NewReplacer())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := a.MCPServerConfigs()[0].OAuth
			if c == nil || c.ClientSecret != "sec-1" || c.ClientID != "gw" || c.EndpointParams.Get("resource") != ok.Resource || c.Scopes[0] != "a" {
				t.Fatalf("resolved %+v", c)
			}
		})
	}
}
