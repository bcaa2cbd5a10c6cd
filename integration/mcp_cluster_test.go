package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// alternating sends each request to the next of several gateways, the
// way a load balancer without affinity does, and counts what each got.
type alternating struct {
	mu    sync.Mutex
	hosts []string
	next  int
	got   map[string]int
}

func (a *alternating) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	host := a.hosts[a.next%len(a.hosts)]
	a.next++
	a.got[host]++
	a.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	r.Header.Set("Authorization", "Bearer "+gatewayKey)
	return http.DefaultTransport.RoundTrip(r)
}

// startMCPReplicas runs, besides this process's Caddy running s, n more
// gateways (the binary, as subprocesses) with the same Caddyfile on ports
// of their own, and returns the hosts of all of them, this process's
// first.
func startMCPReplicas(t *testing.T, s site, n int) []string {
	t.Helper()
	bin := buildGateway(t)
	loadFresh(t, s)
	first, _ := url.Parse(mcpURL(""))
	hosts := []string{first.Host}
	for range n {
		cf := s.caddyfile()
		port, dir := freePort(), t.TempDir()
		for _, r := range [][2]string{
			{fmt.Sprintf("admin localhost:%d", adminPort), fmt.Sprintf("admin localhost:%d", freePort())},
			{"output file " + logPath, "output file " + filepath.Join(dir, "gateway.log")},
			{fmt.Sprintf(":%d {", httpPort), fmt.Sprintf(":%d {", port)},
		} {
			if !strings.Contains(cf, r[0]) {
				t.Fatalf("the Caddyfile has no %q", r[0])
			}
			cf = strings.Replace(cf, r[0], r[1], 1)
		}
		startGateway(t, bin, dir, cf, port)
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", port))
	}
	return hosts
}

// TestMCPThreeInstancesServeOneSession: three gateways on one Redis (this
// process's Caddy and two subprocesses, with the same Caddyfile) serve one
// go-sdk client session whose requests go round robin over them: serving
// is stateless, so no instance needs to have seen the session before, and
// a policy of 5 calls a minute of one tool holds across the three, its
// counter in Redis: the sixth call is refused by whichever instance gets
// it.
func TestMCPThreeInstancesServeOneSession(t *testing.T) {
	requireRedis(t)
	files := newFakeMCP(t, false, fakeTool{name: "read"}, fakeTool{name: "write"})
	prefix := "mcp-" + uuid.NewString()[:8] + ":"
	s := mcpLimitedSite(t, mcpServerBlock("files", files.URL, "allow test"), fmt.Sprintf(`
			policy mcp-trio-%s {
				type requests
				unit rpm
				value 5
				condition metadata.mcp_tool read
			}`, uuid.NewString()), "")
	s.LLM += fmt.Sprintf("\n\t\tredis %s {\n\t\t\tdb %d\n\t\t\tkey_prefix %s\n\t\t}", redistest.Addr(), rlRedisDB, prefix)
	hosts := startMCPReplicas(t, s, 2)

	lb := &alternating{hosts: hosts, got: map[string]int{}}
	cs := mcpClientVia(t, mcpURL(""), lb, nil)
	for i := range 5 {
		if got := toolNames(t, cs); !slices.Equal(got, []string{"files__read", "files__write"}) {
			t.Fatalf("listing %d: %q", i, got)
		}
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"n": i}})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if text := res.Content[0].(*sdk.TextContent).Text; text != fmt.Sprintf(`read:{"n":%d}`, i) {
			t.Fatalf("call %d answered %q", i, text)
		}
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"n": 5}}); err == nil ||
		!strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("the sixth call: %v, want a 429", err)
	}
	if n := len(files.calledTools()); n != 5 {
		t.Fatalf("the server ran %d calls, want 5", n)
	}
	// The session goes on: another tool, on the next instance.
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__write", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, h := range lb.hosts {
		if lb.got[h] < 4 {
			t.Fatalf("requests per instance %v: each should have served several", lb.got)
		}
	}
}
