package integration

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// The openai npm package as a client. integration/testdata/node holds a
// package.json and package-lock.json pinning openai and ws (the Node
// WebSocket the package's Node clients use); the first test that needs
// them runs npm ci there. Without node or npm, or with the npm registry
// unreachable, the tests skip saying so.

// nodeClients returns the directory of the node client scripts, with
// their packages installed.
func nodeClients(t *testing.T) string {
	t.Helper()
	return npmInstalled(t, filepath.Join("testdata", "node"), filepath.Join("openai", "package.json"))
}

// npmInstall is one directory's npm ci, run once per test process.
type npmInstall struct {
	once sync.Once
	err  string
}

// npmInstalls holds an *npmInstall per directory.
var npmInstalls sync.Map

// npmInstalled returns dir (made absolute) with its locked packages
// installed by npm ci, unless node_modules already holds marker. It
// skips when node or npm is missing or the npm registry is unreachable,
// and fails on any other npm error.
func npmInstalled(t *testing.T, dir, marker string) string {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed: the npm clients of %s are not tried", bin, dir)
		}
	}
	v, _ := npmInstalls.LoadOrStore(dir, &npmInstall{})
	in := v.(*npmInstall)
	in.once.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", marker)); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			in.err = err.Error() + ": " + string(out)
		}
	})
	if in.err != "" {
		if registryUnreachable(in.err) {
			t.Skipf("the npm registry is unreachable, the packages of %s could not be installed: %s", dir, in.err)
		}
		t.Fatalf("npm ci in %s: %s", dir, in.err)
	}
	return dir
}

// registryUnreachable reports whether npm's output says it could not
// reach its registry (no network), as opposed to any other failure.
func registryUnreachable(out string) bool {
	for _, s := range []string{"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH", "network request", "FetchError"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// runNode runs script in the node clients' directory with env added, and
// returns its standard output; a failure fails the test with both
// outputs.
func runNode(t *testing.T, script string, env ...string) string {
	t.Helper()
	dir := nodeClients(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestRealtimeNpmClient opens a Realtime session with the openai npm
// package's OpenAIRealtimeWS (Node; the gateway key as its API key, a
// virtual key header) and runs two responses: each one's events arrive
// in the provider's order, text and audio deltas interleaved, with the
// provider's usage; the ledger holds one record per response.
func TestRealtimeNpmClient(t *testing.T) {
	up := newFakeRealtime(t)
	loadSite(t, realtimeSite(t, up, ""))
	// The npm client opens Realtime sessions over wss: only, so a TLS
	// front (a reverse proxy on 127.0.0.1, its certificate given to
	// node) passes its socket to the gateway.
	gw, _ := url.Parse(gatewayURL())
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: gw.Scheme, Host: gw.Host}))
	defer front.Close()
	ca := filepath.Join(t.TempDir(), "front.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runNode(t, "realtime.mjs", "GATEWAY_URL="+front.URL+"/v1", "GATEWAY_KEY="+gatewayKey, "VIRTUAL_KEY=vk-rt",
		"NODE_EXTRA_CA_CERTS="+ca)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"response.created"}
	for i := 0; i < up.deltas; i++ {
		want = append(want, "response.output_text.delta", "response.output_audio.delta")
	}
	want = append(want, "response.done")
	if len(lines) != 2 {
		t.Fatalf("node printed %q, want a line per response", out)
	}
	for i, l := range lines {
		r := gjson.Parse(l)
		var types []string
		for _, ty := range r.Get("types").Array() {
			types = append(types, ty.Str)
		}
		if strings.Join(types, ",") != strings.Join(want, ",") || r.Get("text").Str != "t0t1t2" || r.Get("usage.input_tokens").Int() != 100 {
			t.Errorf("response %d: %s, want events %v", i+1, l, want)
		}
	}
	for _, a := range up.authSeen() {
		if a != "Bearer "+realtimeProviderKey {
			t.Errorf("the provider got Authorization %q, want the virtual key's", a)
		}
	}
	syncLedger(t)
	var logs struct{ Total int64 }
	realtimeWait(t, "a ledger record per response", func() bool {
		syncLedger(t)
		return getJSON(t, "/logs?page_size=100", gatewayKey, &logs) == 200 && logs.Total == 2
	})
}
