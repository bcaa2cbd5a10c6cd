package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// longTool is a tool name that, prefixed, passes 64 characters.
var longTool = "summarise_the_whole_repository_history_into_one_changelog_entry"

// mcpPair starts two fake servers, "files" (four tools, one with a dot and
// one too long once prefixed) and "web" (fetch and search, only fetch
// exposed), and a gateway where key test may use both and key other only
// web.
func mcpPair(t *testing.T) (files, web *fakeMCP) {
	t.Helper()
	files = newFakeMCP(t, false, fakeTool{name: "write"}, fakeTool{name: "read"}, fakeTool{name: "dot.name"}, fakeTool{name: longTool})
	web = newFakeMCP(t, true, fakeTool{name: "fetch"}, fakeTool{name: "search"})
	os.Setenv("MCP_FILES_TOKEN", "files-upstream-token")
	loadFresh(t, mcpSite(t,
		mcpServerBlock("files", files.URL, "bearer {env.MCP_FILES_TOKEN}", "header X-Team gateway", "allow test")+
			mcpServerBlock("web", web.URL, "transport sse", "allow test other", "tools fetch"),
		"egress_allow loopback"))
	return files, web
}

// hashed is the exposed name of a tool whose prefixed name is too long
// or holds other characters: cut, with a hash suffix.
func hashed(full, server, tool string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	b := []byte(full)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 55 {
		b = b[:55]
	}
	return string(b) + "_" + hex.EncodeToString(sum[:4])
}

func TestMCPAggregateSortedNamespacedNames(t *testing.T) {
	files, _ := mcpPair(t)
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	got := toolNames(t, cs)
	want := []string{
		hashed("files__dot.name", "files", "dot.name"),
		"files__read",
		hashed("files__"+longTool, "files", longTool),
		"files__write",
		"web__fetch",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("tools/list = %q, want %q", got, want)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("tools/list is not sorted: %q", got)
	}
	for _, n := range got {
		if len(n) > 64 {
			t.Errorf("tool name %q is %d characters", n, len(n))
		}
	}
	// A second client (a new session) sees the same list.
	if again := toolNames(t, mcpClient(t, mcpURL(""), gatewayKey, nil)); !slices.Equal(again, got) {
		t.Fatalf("second listing %q differs from %q", again, got)
	}

	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"path": "README.md"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; text != `read:{"path":"README.md"}` {
		t.Fatalf("files__read answered %q", text)
	}
	if c := files.calledTools(); !slices.Equal(c, []string{"read"}) {
		t.Fatalf("files saw calls %q, want [read]", c)
	}
	// The server got its own credentials and never the caller's key.
	for _, h := range files.seenHeaders() {
		if h.Get("Authorization") != "Bearer files-upstream-token" || h.Get("X-Team") != "gateway" {
			t.Fatalf("files got Authorization %q, X-Team %q", h.Get("Authorization"), h.Get("X-Team"))
		}
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, gatewayKey) {
					t.Fatalf("the caller's gateway key reached the server in %s", name)
				}
			}
		}
	}
}

// TestMCPDeniedToolRefusedByName: a key sees only the servers and tools it
// may use, and a call of anything else, named directly, is refused with a
// JSON-RPC error before any server is called.
func TestMCPDeniedToolRefusedByName(t *testing.T) {
	files, web := mcpPair(t)
	cs := mcpClient(t, mcpURL(""), mcpOtherKey, nil)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"web__fetch"}) {
		t.Fatalf("other's tools/list = %q, want [web__fetch]", got)
	}
	for _, name := range []string{"files__read", "web__search", "read", "fetch"} {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "unknown tool") {
			t.Errorf("calling %s: %v, want a JSON-RPC invalid-params error (unknown tool)", name, err)
		}
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "web__fetch"}); err != nil {
		t.Fatalf("the allowed tool: %v", err)
	}
	if c := files.calledTools(); len(c) != 0 {
		t.Fatalf("files was called %q", c)
	}
	if c := web.calledTools(); !slices.Equal(c, []string{"fetch"}) {
		t.Fatalf("web saw %q, want [fetch]", c)
	}
	// The one-server endpoint of a server the key may not use answers as
	// an unknown one does.
	for _, path := range []string{"/files", "/nosuch"} {
		code, body := rawMCP(t, path, mcpOtherKey, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if code != 404 || !strings.Contains(body, `"code":-32600`) {
			t.Errorf("%s as other: %d %s, want 404 with a JSON-RPC error", path, code, body)
		}
	}
	// /mcp/web serves web's exposed tools under their own names.
	if got := toolNames(t, mcpClient(t, mcpURL("/web"), mcpOtherKey, nil)); !slices.Equal(got, []string{"fetch"}) {
		t.Fatalf("/mcp/web tools/list = %q, want [fetch]", got)
	}
	// Without a valid key: 401 in the JSON-RPC envelope.
	code, body := rawMCP(t, "", "not-a-key", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if code != 401 || !strings.Contains(body, `"invalid_api_key"`) {
		t.Fatalf("a bad key: %d %s", code, body)
	}
}

// TestMCPStrictJSONRPC: members that a case-insensitive reader takes for
// one, a member given twice, a batch and deep nesting are refused before
// anything is called.
func TestMCPStrictJSONRPC(t *testing.T) {
	files, web := mcpPair(t)
	tests := []struct{ name, body, want string }{
		{"Name smuggling", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__fetch","Name":"files__read"}}`, "differs only in case"},
		{"Method smuggling", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call","params":{"name":"files__read"}}`, "differs only in case"},
		{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__fetch","name":"files__read"}}`, "appears more than once"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__fetch"}}]`, "batches are not accepted"},
		{"deep nesting", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__fetch","arguments":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}}`, "nesting"},
		{"not JSON", `{"jsonrpc":"2.0",`, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := rawMCP(t, "", mcpOtherKey, tt.body)
			if code != 400 || !strings.Contains(body, tt.want) || !strings.Contains(body, `"jsonrpc":"2.0"`) {
				t.Fatalf("%d %s, want 400 with a JSON-RPC error saying %q", code, body, tt.want)
			}
		})
	}
	if c := append(files.calledTools(), web.calledTools()...); len(c) != 0 {
		t.Fatalf("a refused message reached a server: %q", c)
	}
	// The size bound: 413.
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"web__fetch","arguments":{"a":"` + strings.Repeat("x", 5<<20) + `"}}}`
	if code, body := rawMCP(t, "", mcpOtherKey, big); code != 413 || !strings.Contains(body, "exceeds") {
		t.Fatalf("a 5 MiB message: %d %.200s", code, body)
	}
}
