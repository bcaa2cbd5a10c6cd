// Package integration runs the gateway inside a real, in-process Caddy
// loaded from Caddyfiles, against fake providers that speak the providers'
// real wire formats. One Caddy runs per test process (Caddy's config is
// process-global), so tests here must not use t.Parallel; ports are chosen
// free at start so several test processes can run at once.
package integration

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/caddyserver/certmagic"

	_ "github.com/caddy-llm-gateway/caddy-llm-gateway"
)

// gatewayKey is the gateway API key every test Caddyfile accepts.
const gatewayKey = "test-gateway-key-0123456789"

var (
	adminPort int
	httpPort  int
	logPath   string
)

func TestMain(m *testing.M) {
	adminPort, httpPort = freePort(), freePort()
	dir, err := os.MkdirTemp("", "llmgw-it")
	if err != nil {
		panic(err)
	}
	logPath = filepath.Join(dir, "gateway.log")
	os.Setenv("TEST_GATEWAY_KEY", gatewayKey)
	// Caddy's default storage (policies, prompts) goes to a directory of
	// this run, so no test sees records an earlier run left behind.
	os.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	// caddy.DefaultStorage took its path from the environment when the
	// package was initialised, before the lines above: without this the
	// in-process Caddy kept files, batches and limits in the user's real
	// data directory, where later runs found them.
	caddy.DefaultStorage = &certmagic.FileStorage{Path: caddy.AppDataDir()}
	code := m.Run()
	_ = caddy.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// gatewayURL is the base URL clients use, including /v1.
func gatewayURL() string { return fmt.Sprintf("http://127.0.0.1:%d/v1", httpPort) }

// site describes one test Caddyfile.
type site struct {
	// LLM is the body of the global llm { } block besides the api key.
	LLM string
	// Gateway is the body of the llm_gateway { } block.
	Gateway string
	// Before is placed in the site block before the /v1 handler.
	Before string
}

func (s site) caddyfile() string {
	gw := s.Gateway
	if gw == "" {
		gw = "custom_host_allow loopback"
	}
	return fmt.Sprintf(`{
	admin localhost:%d
	auto_https off
	persist_config off
	log {
		output file %s
		format json
		level DEBUG
	}
	llm {
		api_key test {env.TEST_GATEWAY_KEY}
		%s
	}
}

:%d {
	%s
	handle /v1/* {
		llm_gateway {
			%s
		}
	}
}
`, adminPort, logPath, s.LLM, httpPort, s.Before, gw)
}

// adapt turns a Caddyfile into Caddy's JSON.
func adapt(cf string) ([]byte, error) {
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	return cfg, err
}

// loadSite runs s in the process's Caddy, replacing whatever ran before.
func loadSite(t testing.TB, s site) {
	t.Helper()
	if err := tryLoad(s); err != nil {
		t.Fatalf("loading Caddyfile: %v\n%s", err, s.caddyfile())
	}
}

func tryLoad(s site) error {
	newHTTPPort()
	cfg, err := adapt(s.caddyfile())
	if err != nil {
		return err
	}
	truncateLog()
	return caddy.Load(cfg, true)
}

var logMu sync.Mutex

func truncateLog() {
	logMu.Lock()
	defer logMu.Unlock()
	_ = os.WriteFile(logPath, nil, 0o600)
}

// readLog returns what the gateway logged since the last load.
func readLog(t testing.TB) string {
	t.Helper()
	time.Sleep(20 * time.Millisecond) // let the logger's writes land
	b, _ := os.ReadFile(logPath)
	return string(b)
}

// gatewayLogLines returns the llm_gateway request entries.
func gatewayLogLines(t testing.TB) []string {
	var out []string
	for _, l := range strings.Split(readLog(t), "\n") {
		if strings.Contains(l, `"logger":"http.handlers.llm_gateway"`) && strings.Contains(l, `"msg":"llm request"`) {
			out = append(out, l)
		}
	}
	return out
}

// do sends a request to the gateway with the test key and the given
// headers (name, value pairs).
func do(t testing.TB, method, path string, body []byte, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, gatewayURL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-gateway-api-key", gatewayKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp, buf.Bytes()
}

func itoa(n int) string { return fmt.Sprint(n) }

// getAdmin GETs a path of the admin API.
func getAdmin(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d%s", adminPort, path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// loadFresh is loadSite followed by settleReload: use it in tests that
// send requests right after a reload. The test's pooled connections are
// dropped when it ends, so the next test's reload cannot race them.
func loadFresh(t testing.TB, s site) {
	t.Helper()
	loadSite(t, s)
	settleReload()
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
}

// settleReload waits for the previous config's listener to close and
// drops the client's pooled connections to the previous server. Caddy
// binds each config's listener with SO_REUSEPORT and closes the old one
// asynchronously after Load returns; until then the kernel may hand a new
// connection to the old socket, which resets it when it closes, and a
// pooled keep-alive connection may be closed by the old server's shutdown
// just as a request is written on it. Both show up as EOF or "connection
// reset by peer" on the next request. The wait is bounded and reads
// /proc/net/tcp*, so elsewhere than Linux it does nothing.
func settleReload() {
	for i := 0; i < 2000 && listeningSockets(httpPort) > 1; i++ {
		time.Sleep(time.Millisecond)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// loadCaddyfile adapts and runs cf in the process's Caddy, with a fresh
// log, and waits for the previous config's listener to go (settleReload).
func loadCaddyfile(t testing.TB, cf string) {
	t.Helper()
	cfg, err := adapt(cf)
	if err != nil {
		t.Fatalf("adapting: %v\n%s", err, cf)
	}
	truncateLog()
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("loading: %v\n%s", err, cf)
	}
	settleReload()
}

// listeningSockets counts the TCP sockets listening on port.
func listeningSockets(port int) int {
	suffix := fmt.Sprintf(":%04X", port)
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			fs := strings.Fields(l)
			if len(fs) > 3 && fs[3] == "0A" && strings.HasSuffix(fs[1], suffix) { // 0A: LISTEN
				n++
			}
		}
	}
	return n
}

// logLineFor returns the gateway's log entry for a trace id; other tests'
// requests may still be finishing, so entries are matched by id, not count.
func logLineFor(t testing.TB, traceID string) string {
	t.Helper()
	for _, l := range gatewayLogLines(t) {
		if strings.Contains(l, `"trace_id":"`+traceID+`"`) {
			return l
		}
	}
	t.Fatalf("no log entry for trace %s", traceID)
	return ""
}

// newHTTPPort moves the next config's site to a fresh port. Caddy binds
// listeners with SO_REUSEPORT and closes the previous config's socket
// only after Load returns, so a connection made right after a reload to
// the same port can land on the closing socket and be reset; a new port
// per load leaves the old server nothing but its in-flight requests.
func newHTTPPort() {
	httpPort = freePort()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}
