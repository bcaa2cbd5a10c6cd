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

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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

// TestMCPTwoInstancesServeOneSession: this process's Caddy and the
// gateway binary as a subprocess, with the same Caddyfile, serve one
// client session whose requests alternate between them: serving is
// stateless, so neither needs to have seen the session before.
func TestMCPTwoInstancesServeOneSession(t *testing.T) {
	bin := buildGateway(t)
	files := newFakeMCP(t, false, fakeTool{name: "read"}, fakeTool{name: "write"})
	s := mcpSite(t, mcpServerBlock("files", files.URL, "allow test"), "egress_allow loopback")
	loadFresh(t, s)
	cf := s.caddyfile()
	port2, dir := freePort(), t.TempDir()
	for _, r := range [][2]string{
		{fmt.Sprintf("admin localhost:%d", adminPort), fmt.Sprintf("admin localhost:%d", freePort())},
		{"output file " + logPath, "output file " + filepath.Join(dir, "second.log")},
		{fmt.Sprintf(":%d {", httpPort), fmt.Sprintf(":%d {", port2)},
	} {
		if !strings.Contains(cf, r[0]) {
			t.Fatalf("the Caddyfile has no %q", r[0])
		}
		cf = strings.Replace(cf, r[0], r[1], 1)
	}
	startGateway(t, bin, dir, cf, port2)

	first, _ := url.Parse(mcpURL(""))
	lb := &alternating{hosts: []string{first.Host, fmt.Sprintf("127.0.0.1:%d", port2)}, got: map[string]int{}}
	cs := mcpClientVia(t, mcpURL(""), lb, nil)
	for i := range 3 {
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
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, h := range lb.hosts {
		if lb.got[h] < 3 {
			t.Fatalf("requests per instance %v: each should have served several", lb.got)
		}
	}
}
