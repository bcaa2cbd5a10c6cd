package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tsClientDir holds the TypeScript SDK client script and its package
// (node_modules installed by npmInstalled; not in the repository).
const tsClientDir = "testdata/mcp-ts-client"

// TestMCPTypeScriptClient: the official TypeScript SDK
// (@modelcontextprotocol/sdk, Streamable HTTP) connects to /mcp with a
// gateway key, negotiates a version, lists the aggregated tools in order
// and calls one, and a tool the
// key may not use is refused by name with -32602. The package is
// installed with npm ci on first use (npmInstalled: skipped only without
// node/npm or the npm registry).
func TestMCPTypeScriptClient(t *testing.T) {
	dir := npmInstalled(t, tsClientDir, filepath.Join("@modelcontextprotocol", "sdk", "package.json"))
	files := newFakeMCP(t, false, fakeTool{name: "read"}, fakeTool{name: "write"})
	secret := newFakeMCP(t, false, fakeTool{name: "leak"})
	loadFresh(t, mcpSite(t, mcpServerBlock("files", files.URL, "allow test")+mcpServerBlock("secret", secret.URL, "allow other"),
		"egress_allow loopback"))
	cmd := exec.Command("node", "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+mcpURL(""), "MCP_KEY="+gatewayKey, "MCP_TOOL=files__read", "MCP_DENIED=secret__leak")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		ProtocolVersion string   `json:"protocolVersion"`
		Tools           []string `json:"tools"`
		Text            string   `json:"text"`
		IsError         bool     `json:"isError"`
		Denied          struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"denied"`
		Error string `json:"error"`
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil || got.Error != "" {
		t.Fatalf("client output %s (%v)", out, err)
	}
	if !slices.Equal(got.Tools, []string{"files__read", "files__write"}) {
		t.Fatalf("tools %q", got.Tools)
	}
	if got.Text != `read:{"n":1}` || got.IsError {
		t.Fatalf("call answered %q (isError %v)", got.Text, got.IsError)
	}
	if got.Denied.Code != -32602 || !strings.Contains(got.Denied.Message, "secret__leak") {
		t.Fatalf("the denied call: %+v", got.Denied)
	}
	if n := len(secret.calledTools()); n != 0 {
		t.Fatalf("the denied server ran %d calls", n)
	}
	t.Logf("TypeScript SDK: protocol %q, tools %q", got.ProtocolVersion, got.Tools)
}
