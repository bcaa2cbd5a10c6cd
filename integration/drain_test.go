package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// drainCaddyfile is a gateway with the probes of examples/Caddyfile and
// the drain settings docs/deploy.md recommends.
func drainCaddyfile(admin, port int, grace, delay string) string {
	return fmt.Sprintf(`{
	admin localhost:%d
	auto_https off
	persist_config off
	grace_period %s
	shutdown_delay %s
	llm {
		api_key test {env.TEST_GATEWAY_KEY}
	}
}

:%d {
	handle /healthz {
		llm_health live
	}
	handle /readyz {
		llm_health ready
	}
	handle /v1/* {
		llm_gateway {
			custom_host_allow loopback
		}
	}
}
`, admin, grace, delay, port)
}

// heldStreams makes up's chat streams send their first event, report on
// started and wait for release before finishing.
func heldStreams(up *fakeOpenAI, started chan<- struct{}, release <-chan struct{}) {
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		started <- struct{}{}
		writeChatStream(w, "gpt-4o-mini", []string{"Hel", "lo", "!"}, false, release)
		return true
	}
}

// streamResult is what a client of a held stream received.
type streamResult struct {
	status int
	body   string
	err    error
}

// openStreams starts n streaming chat requests to the gateway on port,
// each on its own connection, and returns their results when all end.
func openStreams(port, n int, upURL string) func() []streamResult {
	results := make([]streamResult, n)
	var wg sync.WaitGroup
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", port), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-gateway-api-key", gatewayKey)
			req.Header.Set("x-gateway-provider", "openai")
			req.Header.Set("x-gateway-custom-host", upURL)
			req.Header.Set("Authorization", "Bearer sk-test-provider")
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Do(req)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			results[i] = streamResult{status: resp.StatusCode, body: string(b), err: err}
		}()
	}
	return func() []streamResult { wg.Wait(); return results }
}

// getFresh GETs url on a new connection.
func getFresh(url string) (int, string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestDrainOnSIGTERM sends SIGTERM to a built gateway with streams in
// flight against a provider that holds them: readiness answers 503
// "draining" at once while the listener still accepts (shutdown_delay),
// then new connections are refused, every stream in flight completes
// when the provider finishes it, and the process exits cleanly within
// its grace period.
func TestDrainOnSIGTERM(t *testing.T) {
	bin := buildGateway(t)
	up := newFakeOpenAI(t)
	const n = 20
	started, release := make(chan struct{}, n), make(chan struct{})
	heldStreams(up, started, release)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	port, admin := freePort(), freePort()
	const grace = 60 * time.Second
	// The delay only has to outlast the few probes below; it is long so
	// that a loaded machine still sees them.
	p := startGateway(t, bin, t.TempDir(), drainCaddyfile(admin, port, grace.String(), "5s"), port)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if status, body, err := getFresh(base + "/readyz"); err != nil || status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("ready before SIGTERM: %d %s %v", status, body, err)
	}

	wait := openStreams(port, n, up.URL)
	for i := 0; i < n; i++ {
		<-started
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()

	// Not ready at once, while the listener still accepts.
	status, body, err := getFresh(base + "/readyz")
	for i := 0; i < 500 && err == nil && status == 200; i++ {
		time.Sleep(10 * time.Millisecond)
		status, body, err = getFresh(base + "/readyz")
	}
	if err != nil || status != 503 || body != `{"status":"not_ready","failing":["draining"]}` {
		t.Fatalf("readiness after SIGTERM: %d %s %v\n%s", status, body, err, p.out.String())
	}
	if status, body, err := getFresh(base + "/healthz"); err != nil || status != 200 {
		t.Fatalf("liveness while draining: %d %s %v", status, body, err)
	}

	// After the delay, new connections are refused while the streams
	// are still held open.
	refused := false
	for i := 0; i < 3000 && !refused; i++ {
		_, _, err = getFresh(base + "/healthz")
		refused = errors.Is(err, syscall.ECONNREFUSED)
		if !refused {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !refused {
		t.Fatalf("new connections still accepted after the shutdown delay (last error %v)", err)
	}
	select {
	case <-p.exited:
		t.Fatalf("the gateway exited with streams in flight:\n%s", p.out.String())
	default:
	}

	// The provider finishes: every stream completes whole.
	close(release)
	released = true
	for i, r := range wait() {
		if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"content":"Hel"`) ||
			!strings.Contains(r.body, `"content":"!"`) || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
			t.Errorf("stream %d: %d %v\n%s", i, r.status, r.err, r.body)
		}
	}

	select {
	case <-p.exited:
	case <-time.After(time.Until(signalled.Add(grace + 10*time.Second))):
		t.Fatalf("the gateway did not exit within its grace period:\n%s", p.out.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p.out.String())
	}
	if log := p.out.String(); strings.Contains(log, "server shutdown") || strings.Contains(log, "unclean shutdown") {
		t.Fatalf("the shutdown reported an error:\n%s", log)
	}
}

// TestDrainGraceEnds: a stream that outlasts grace_period does not keep
// the process: it exits once the grace is over, cutting the stream.
func TestDrainGraceEnds(t *testing.T) {
	bin := buildGateway(t)
	up := newFakeOpenAI(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	heldStreams(up, started, release)
	defer close(release)

	port, admin := freePort(), freePort()
	p := startGateway(t, bin, t.TempDir(), drainCaddyfile(admin, port, "1s", "0s"), port)
	wait := openStreams(port, 1, up.URL)
	<-started
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the gateway kept running past its 1s grace with a stream held:\n%s", p.out.String())
	}
	r := wait()[0]
	if strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("the held stream completed: %q", r.body)
	}
	if !strings.Contains(p.out.String(), "grace period") {
		t.Fatalf("the gateway did not log its grace period:\n%s", p.out.String())
	}
}
