package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPEgressRefusesLoopback: without egress_allow a server on a
// loopback address, given as an IP or as a name that resolves to one, is
// refused at dial time: not one connection reaches it, /mcp/{server}
// answers a JSON-RPC error saying the egress policy refused it, and /mcp
// serves the other servers without it.
func TestMCPEgressRefusesLoopback(t *testing.T) {
	byIP := newFakeMCP(t, false, fakeTool{name: "read"})
	byName := newFakeMCP(t, false, fakeTool{name: "read"})
	named := strings.Replace(byName.URL, "127.0.0.1", "localhost", 1)
	loadFresh(t, mcpSite(t,
		mcpServerBlock("byip", byIP.URL, "allow test")+mcpServerBlock("byname", named, "allow test"),
		""))
	for _, path := range []string{"/byip", "/byname"} {
		code, body := rawMCP(t, path, gatewayKey, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
		if code != 200 || !strings.Contains(body, `"id":7`) || !strings.Contains(body, "egress policy") {
			t.Errorf("%s: %d %s, want a JSON-RPC error naming the egress policy", path, code, body)
		}
	}
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	if got := toolNames(t, cs); len(got) != 0 {
		t.Fatalf("/mcp listed %q from refused servers", got)
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "byip__read"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("calling a refused server's tool: %v", err)
	}
	if n := byIP.conns.Load() + byName.conns.Load(); n != 0 {
		t.Fatalf("%d connections reached servers the egress policy refuses", n)
	}
}

// TestMCPEgressAllowLoopback is the same servers with egress_allow
// loopback: they are reached.
func TestMCPEgressAllowLoopback(t *testing.T) {
	byName := newFakeMCP(t, false, fakeTool{name: "read"})
	named := strings.Replace(byName.URL, "127.0.0.1", "localhost", 1)
	loadFresh(t, mcpSite(t, mcpServerBlock("byname", named, "allow test"), "egress_allow loopback"))
	if got := toolNames(t, mcpClient(t, mcpURL("/byname"), gatewayKey, nil)); len(got) != 1 || got[0] != "read" {
		t.Fatalf("tools/list = %q, want [read]", got)
	}
	if byName.conns.Load() == 0 {
		t.Fatal("the allowed server saw no connection")
	}
}
