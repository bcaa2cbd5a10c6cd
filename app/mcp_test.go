package app

import (
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

func TestCaddyfileMCPServer(t *testing.T) {
	cfg, err := adapt(t, "{\n\tadmin off\n\tllm {\n\t\tmcp_server files {\n\t\t\turl https://mcp.example.com/mcp\n\t\t\theader X-Team {env.TEAM}\n\t\t\theader X-Other b\n\t\t\tbearer {env.TOKEN}\n\t\t\ttransport sse\n\t\t\tallow ci workspace:4f1d2c3b-1111-4222-8333-444455556666\n\t\t\tallow *\n\t\t\ttools read_* list\n\t\t}\n\t}\n}\n:0 {\n\trespond ok\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	s := gjson.GetBytes(cfg, "apps.llm.mcp_servers.0")
	for path, want := range map[string]string{
		"name": "files", "url": "https://mcp.example.com/mcp", "headers.X-Team": "{env.TEAM}", "headers.X-Other": "b",
		"bearer": "{env.TOKEN}", "transport": "sse", "allow.0": "ci", "allow.2": "*", "tools.1": "list",
	} {
		if got := s.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q (%s)", path, got, want, s.Raw)
		}
	}
	for _, tc := range []struct{ lines, wantErr string }{
		{"mcp_server a {\n\t\t\tallow *\n\t\t}", "url is required"},
		{"mcp_server a {\n\t\t\turl https://x\n\t\t\tcommand /bin/sh\n\t\t}", `unknown mcp_server option "command"`},
		{"mcp_server a {\n\t\t\turl https://x\n\t\t\theader A 1\n\t\t\theader A 2\n\t\t}", "given twice"},
		{"mcp_server {\n\t\t\turl https://x\n\t\t}", "wrong argument count"},
	} {
		_, err := adapt(t, "{\n\tadmin off\n\tllm {\n\t\t"+tc.lines+"\n\t}\n}\n:0 {\n\trespond ok\n}\n")
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: err %v, want %q", tc.lines, err, tc.wantErr)
		}
	}
}

func TestProvisionMCP(t *testing.T) {
	os.Setenv("MCP_TEST_TOKEN", "tok-123")
	os.Setenv("MCP_TEST_EMPTY", "")
	ok := MCPServer{Name: "files", URL: "https://mcp.example.com/mcp", Bearer: "{env.MCP_TEST_TOKEN}",
		Headers: map[string]string{"x-team": "a"}, Allow: []string{"ci"}}
	tests := []struct {
		name    string
		mutate  func(*MCPServer)
		wantErr string
	}{
		{"valid", func(*MCPServer) {}, ""},
		{"file URL", func(s *MCPServer) { s.URL = "file:///etc/passwd" }, "http:// or https://"},
		{"no host", func(s *MCPServer) { s.URL = "https:///mcp" }, "http:// or https://"},
		{"credentials in the URL", func(s *MCPServer) { s.URL = "https://u:p@mcp.example.com/" }, "neither credentials"},
		{"bad name", func(s *MCPServer) { s.Name = "a/b" }, "a name is"},
		{"double underscore", func(s *MCPServer) { s.Name = "a__b" }, "a name is"},
		{"long name", func(s *MCPServer) { s.Name = strings.Repeat("a", 33) }, "a name is"},
		{"transport", func(s *MCPServer) { s.Transport = "stdio" }, "streamable or sse"},
		{"reserved header", func(s *MCPServer) { s.Headers = map[string]string{"Mcp-Session-Id": "x"} }, "cannot be set"},
		{"Authorization beside bearer", func(s *MCPServer) { s.Headers = map[string]string{"authorization": "x"} }, "both given"},
		{"header value with a newline", func(s *MCPServer) { s.Headers = map[string]string{"X-A": "a\nb"} }, "characters a header cannot"},
		{"empty placeholder", func(s *MCPServer) { s.Bearer = "{env.MCP_TEST_EMPTY}" }, "is empty"},
		{"workspace not a UUID", func(s *MCPServer) { s.Allow = []string{"workspace:nope"} }, "workspace:<uuid>"},
		{"bad glob", func(s *MCPServer) { s.Tools = []string{"["} }, "not a glob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			s.Headers = map[string]string{"x-team": "a"}
			tt.mutate(&s)
			a := &App{logger: zap.NewNop()}
			a.MCPServers = []MCPServer{s}
			err := a.provisionMCP(caddy.NewReplacer())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				c := a.MCPServerConfigs()[0]
				if c.Header.Get("Authorization") != "Bearer tok-123" || c.Header.Get("X-Team") != "a" || c.Transport != MCPTransportStreamable {
					t.Fatalf("resolved %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
	a := &App{logger: zap.NewNop()}
	a.MCPServers = []MCPServer{ok, ok}
	if err := a.provisionMCP(caddy.NewReplacer()); err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Fatalf("two servers of one name: %v", err)
	}
}

// TestMCPServerAllows: Caddyfile keys by name, any key by workspace, and
// an API key never by a name, which its workspace chose.
func TestMCPServerAllows(t *testing.T) {
	ws := "4f1d2c3b-1111-4222-8333-444455556666"
	a := &App{logger: zap.NewNop()}
	a.MCPServers = []MCPServer{{Name: "s", URL: "https://x", Allow: []string{"ci", "workspace:" + strings.ToUpper(ws)}}, {Name: "all", URL: "https://x", Allow: []string{"*"}}, {Name: "none", URL: "https://x"}}
	if err := a.provisionMCP(caddy.NewReplacer()); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*MCPServerConfig{}
	for _, c := range a.MCPServerConfigs() {
		byName[c.Name] = c
	}
	tests := []struct {
		name   string
		id     *identity.Caller
		server string
		want   bool
	}{
		{"Caddyfile key by name", &identity.Caller{Name: "ci", Source: keys.SourceConfig, WorkspaceID: "other"}, "s", true},
		{"API key with the same name", &identity.Caller{Name: "ci", Source: keys.SourceAPI, WorkspaceID: "other"}, "s", false},
		{"API key of the workspace", &identity.Caller{Name: "x", Source: keys.SourceAPI, WorkspaceID: ws}, "s", true},
		{"another key", &identity.Caller{Name: "dev", Source: keys.SourceConfig, WorkspaceID: "other"}, "s", false},
		{"star", &identity.Caller{Name: "dev", Source: keys.SourceAPI}, "all", true},
		{"no allow entries", &identity.Caller{Name: "ci", Source: keys.SourceConfig}, "none", false},
		{"no identity", nil, "all", false},
	}
	for _, tt := range tests {
		if got := byName[tt.server].Allows(tt.id); got != tt.want {
			t.Errorf("%s: Allows = %v, want %v", tt.name, got, tt.want)
		}
	}
}
