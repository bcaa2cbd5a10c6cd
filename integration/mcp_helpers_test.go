package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpOtherKey is a second gateway key, for access tests.
const mcpOtherKey = "test-mcp-other-key-0123456789"

// fakeMCP is an MCP server made with the go-sdk, on 127.0.0.1, that
// counts the connections it accepts and remembers what reached it.
type fakeMCP struct {
	srv   *httptest.Server
	URL   string
	conns atomic.Int64

	mu      sync.Mutex
	calls   []string      // tool names called, in order
	args    []string      // their raw arguments
	headers []http.Header // the headers of every HTTP request
}

// fakeTool is a tool of a fake server: it answers "<name>:<arguments>"
// unless run says otherwise.
type fakeTool struct {
	name string
	run  func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error)
}

// newFakeMCP serves tools over Streamable HTTP (sse: the HTTP+SSE
// transport) until the test ends.
func newFakeMCP(t testing.TB, sse bool, tools ...fakeTool) *fakeMCP {
	t.Helper()
	return newFakeMCPAuth(t, sse, nil, tools...)
}

// newFakeMCPAuth is newFakeMCP answering 401 to every request authorized
// refuses (nil: none).
func newFakeMCPAuth(t testing.TB, sse bool, authorized func(*http.Request) bool, tools ...fakeTool) *fakeMCP {
	t.Helper()
	f := &fakeMCP{}
	server := sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, nil)
	for _, tool := range tools {
		tool := tool
		server.AddTool(&sdk.Tool{Name: tool.name, Description: "fake " + tool.name,
			InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				f.mu.Lock()
				f.calls = append(f.calls, req.Params.Name)
				f.args = append(f.args, string(req.Params.Arguments))
				f.mu.Unlock()
				if tool.run != nil {
					return tool.run(ctx, req)
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tool.name + ":" + string(req.Params.Arguments)}}}, nil
			})
	}
	var h http.Handler
	if sse {
		h = sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return server }, nil)
	} else {
		h = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		if authorized != nil && !authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	f.srv.Listener = &countingListener{Listener: f.srv.Listener, n: &f.conns}
	f.srv.Start()
	t.Cleanup(func() {
		// The gateway's sessions (the SSE transport's GET) outlive the
		// test until the next config loads: Close alone would wait for
		// them.
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	f.URL = f.srv.URL
	return f
}

// calledTools returns the tool names called so far.
func (f *fakeMCP) calledTools() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeMCP) seenHeaders() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.headers...)
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// mcpSite is a test site with the given mcp_server blocks in the llm
// app, a second key "other", and llm_mcp on /mcp* with opts in its
// block.
func mcpSite(t testing.TB, servers, opts string) site {
	t.Helper()
	os.Setenv("MCP_OTHER_KEY", mcpOtherKey)
	return site{
		LLM:    "api_key other {env.MCP_OTHER_KEY}\n\t\t" + servers,
		Before: "handle /mcp* {\n\t\tllm_mcp {\n\t\t\t" + opts + "\n\t\t}\n\t}",
	}
}

// mcpServerBlock is an mcp_server block.
func mcpServerBlock(name, url string, lines ...string) string {
	return fmt.Sprintf("mcp_server %s {\n\t\t\turl %s\n\t\t\t%s\n\t\t}\n\t\t", name, url, strings.Join(lines, "\n\t\t\t"))
}

// mcpURL is the gateway's MCP endpoint for path ("" for /mcp).
func mcpURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d/mcp%s", httpPort, path)
}

// keyTransport adds a gateway key to every request, the way an MCP
// client configured with a header does.
type keyTransport struct {
	key  string
	next http.RoundTripper
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.next.RoundTrip(r)
}

// mcpClient connects a go-sdk client to endpoint as key.
func mcpClient(t testing.TB, endpoint, key string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return mcpClientVia(t, endpoint, &keyTransport{key: key, next: http.DefaultTransport}, opts)
}

func mcpClientVia(t testing.TB, endpoint string, rt http.RoundTripper, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolNames lists the tools endpoint serves to cs.
func toolNames(t testing.TB, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// rawMCP posts body to the MCP endpoint as key and returns the status
// and the answer.
func rawMCP(t testing.TB, path, key, body string) (int, string) {
	t.Helper()
	status, _, answer := rawMCPHeaders(t, path, key, body)
	return status, answer
}

// rawMCPHeaders is rawMCP with extra request headers (name, value
// pairs), returning the answer's headers too.
func rawMCPHeaders(t testing.TB, path, key, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, mcpURL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// headerTransport sets one header on every request.
type headerTransport struct {
	name, value string
	next        http.RoundTripper
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}
