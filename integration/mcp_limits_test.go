package integration

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// mcpLimitedSite is an MCP site whose /mcp route has llm_ratelimit in
// front of llm_mcp with the given policies, and a ledger in dsn (none
// when "").
func mcpLimitedSite(t *testing.T, servers, policies, dsn string) site {
	s := mcpSite(t, servers, "egress_allow loopback")
	if dsn != "" {
		s.LLM += fmt.Sprintf("\n\t\tledger %q", dsn)
	}
	s.Before = "handle /mcp* {\n\t\tllm_ratelimit {\n" + policies + "\n\t\t}\n\t\tllm_mcp {\n\t\t\tegress_allow loopback\n\t\t}\n\t}"
	return s
}

// mcpLedger returns the ledger records of this test's calls (those whose
// metadata run is run), as key sees them.
func mcpLedger(t *testing.T, key, run string) []gjson.Result {
	t.Helper()
	syncLedger(t)
	resp, raw := do(t, "GET", "/logs?limit=100&metadata="+url.QueryEscape(`{"run":"`+run+`"}`), nil, "x-gateway-api-key", key)
	if resp.StatusCode != 200 {
		t.Fatalf("/logs: %d %s", resp.StatusCode, raw)
	}
	return gjson.GetBytes(raw, "data").Array()
}

// TestMCPCallLimits: a policy of 2 tools/call a minute per key on one
// tool (metadata.mcp_tool, group_by api_key) lets each key call it twice;
// the third call is refused before the server with HTTP 429 and JSON-RPC
// error -32029 in the limiter's words, while the key's other tool and
// the other key still run; listing is never counted. Every call,
// refused or not, is one ledger record of operation mcp_call.
func TestMCPCallLimits(t *testing.T) {
	files := newFakeMCP(t, false, fakeTool{name: "read"}, fakeTool{name: "write"})
	name := "mcp-read-" + uuid.NewString()
	loadFresh(t, mcpLimitedSite(t, mcpServerBlock("files", files.URL, "allow test other"), fmt.Sprintf(`
			policy %s {
				type requests
				unit rpm
				value 2
				condition metadata.mcp_tool read
				group_by api_key
			}`, name), filepath.Join(t.TempDir(), "ledger.db")))
	run := uuid.NewString()
	meta := `{"run":"` + run + `"}`
	withMeta := func(key string) *sdk.ClientSession {
		return mcpClientVia(t, mcpURL(""), &keyTransport{key: key, next: &headerTransport{name: "x-gateway-metadata", value: meta}}, nil)
	}
	cs := withMeta(gatewayKey)
	for i := range 3 {
		// Listings pass uncounted.
		toolNames(t, cs)
		if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"n": i}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if i == 1 {
			break
		}
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"n": 2}})
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("third call: %v, want a 429", err)
	}
	status, hdr, body := rawMCPHeaders(t, "", gatewayKey, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files__read","arguments":{}}}`,
		"x-gateway-metadata", meta)
	if status != 429 || gjson.Get(body, "error.code").Int() != -32029 || gjson.Get(body, "id").Int() != 7 ||
		gjson.Get(body, "error.data.code").Str != "rate_limit_exceeded" || !strings.Contains(gjson.Get(body, "error.message").Str, name) ||
		hdr.Get("Retry-After") == "" {
		t.Fatalf("refused call: %d %v %s", status, hdr, body)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__write", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("another tool: %v", err)
	}
	other := withMeta(mcpOtherKey)
	if _, err := other.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("another key: %v", err)
	}
	if got := strings.Join(files.calledTools(), " "); got != "read read write read" {
		t.Fatalf("the server ran %q", got)
	}

	recs := mcpLedger(t, gatewayKey, run)
	statuses := map[int64]int{}
	for _, r := range recs {
		if r.Get("operation").Str != "mcp_call" || r.Get("provider").Str != "mcp:files" ||
			r.Get("metadata.mcp_server").Str != "files" || r.Get("metadata.mcp_tool").Str != r.Get("model").Str ||
			r.Get("metadata.mcp_request_bytes").Int() == 0 || r.Get("metadata.mcp_response_bytes").Int() == 0 {
			t.Fatalf("record %s", r.Raw)
		}
		statuses[r.Get("status").Int()]++
	}
	// The test key's 5 calls (2 read, 2 refused, 1 write); the other
	// key's call is in its own workspace's ledger.
	if len(recs) != 5 || statuses[200] != 3 || statuses[429] != 2 {
		t.Fatalf("%d records, statuses %v", len(recs), statuses)
	}
}
