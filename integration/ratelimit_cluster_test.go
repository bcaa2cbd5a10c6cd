package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startRedisPair starts two gateways with the rate-limit site on one
// Redis: the gateway binary as a subprocess, with its own ports and
// storage (its /v1 base URL is returned), and this process's Caddy; and
// the fake provider both send to.
func startRedisPair(t *testing.T) (up *fakeOpenAI, base2 string) {
	t.Helper()
	requireRedis(t)
	bin := buildGateway(t)
	up = newFakeOpenAI(t)
	port2 := freePort()
	dir := t.TempDir()
	second := rlSite{Redis: redisBlock(false), Storage: filepath.Join(dir, "storage"),
		HTTPPort: port2, AdminPort: freePort(), Log: filepath.Join(dir, "second.log")}
	startGateway(t, bin, dir, second.caddyfile(), port2)
	loadRL(t, rlSite{Redis: redisBlock(false)})
	return up, fmt.Sprintf("http://127.0.0.1:%d/v1", port2)
}

// TestClusterRateLimit runs two gateways sharing one Redis: this process's
// Caddy and the gateway binary as a subprocess, each with its own ports and
// storage. A policy created through the API of one is enforced by both,
// and concurrent requests spread over both are admitted exactly up to the
// limit, at every concurrency tried.
func TestClusterRateLimit(t *testing.T) {
	up, base2 := startRedisPair(t)

	// Created on the first instance; the second has not loaded its policy
	// set yet (its readiness probe stayed off /v1), so it loads it with
	// this policy on its first request.
	const k = 25
	createPolicy(t, gatewayKey, fmt.Sprintf(`{"type":"requests","unit":"rph","value":%d,"name":"cluster",`+
		`"conditions":[{"key":"metadata.run","value":"*"}],"group_by":[{"key":"metadata.run"}]}`, k))

	bases := []string{gatewayURL(), base2}
	largest := 0
	for n := 50; n <= maxConcurrency(); n *= 2 {
		run := fmt.Sprintf(`{"run":"n%d"}`, n) // a counter of its own per level
		before := up.count()
		codes, bodies := fire(t, bases, up.URL, n, "x-gateway-metadata", run)
		got := countStatuses(codes)
		perInstance := [2]int{}
		for i, c := range codes {
			if c == 200 {
				perInstance[i%2]++
			}
		}
		if got[200] != k || got[429] != n-k || up.count()-before != k {
			other := ""
			for i, c := range codes {
				if c != 200 && c != 429 {
					other = fmt.Sprintf("; instance %d answered %d: %s", i%2, c, bodies[i])
					break
				}
			}
			t.Fatalf("%d concurrent requests over 2 instances, limit %d: %v, admitted per instance %v (the provider saw %d)%s",
				n, k, got, perInstance, up.count()-before, other)
		}
		if perInstance[0] == 0 || perInstance[1] == 0 {
			t.Logf("n=%d: all admissions on one instance %v", n, perInstance)
		}
		largest = n
		t.Logf("n=%d concurrent over 2 instances: exactly %d admitted (%d + %d), %d refused", n, k, perInstance[0], perInstance[1], got[429])
	}
	t.Logf("the limit held exactly up to %d concurrent requests", largest)
}

// maxConcurrency is the largest number of concurrent requests the cluster
// test sends: 3200, or less when the open-file limit could not hold them
// (each request takes a client socket here, and half of them a server
// socket too).
func maxConcurrency() int {
	n := 3200
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n+512) {
		n = max(int(lim.Cur)-512, 100) / 2
	}
	return n
}

var (
	gatewayBinOnce sync.Once
	gatewayBin     string
	gatewayBinErr  error
)

// buildGateway builds ./cmd/caddy once per test process. An overlay adds
// the ratelimit import to it, so the binary has llm_ratelimit whether or
// not the root package imports it yet (a duplicate import is harmless).
func buildGateway(t *testing.T) string {
	t.Helper()
	gatewayBinOnce.Do(func() {
		root := moduleRoot()
		dir, err := os.MkdirTemp("", "llmgw-bin")
		if err != nil {
			gatewayBinErr = err
			return
		}
		extra := filepath.Join(dir, "ratelimit_import.go")
		src := "package main\n\nimport _ \"github.com/caddy-llm-gateway/caddy-llm-gateway/ratelimit\"\n"
		if gatewayBinErr = os.WriteFile(extra, []byte(src), 0o600); gatewayBinErr != nil {
			return
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{
			filepath.Join(root, "cmd", "caddy", "zz_ratelimit_import_overlay.go"): extra,
		}})
		ovPath := filepath.Join(dir, "overlay.json")
		if gatewayBinErr = os.WriteFile(ovPath, overlay, 0o600); gatewayBinErr != nil {
			return
		}
		gatewayBin = filepath.Join(dir, "caddy")
		cmd := exec.Command("go", "build", "-overlay", ovPath, "-o", gatewayBin, "./cmd/caddy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			gatewayBinErr = fmt.Errorf("go build ./cmd/caddy: %v\n%s", err, out)
		}
	})
	if gatewayBinErr != nil {
		t.Fatal(gatewayBinErr)
	}
	return gatewayBin
}

// moduleRoot is the repository root: the parent of this file's directory.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// gatewayProc is a gateway subprocess started by startGateway.
type gatewayProc struct {
	cmd *exec.Cmd
	// exited is closed when the process has exited (cmd.ProcessState is
	// then set).
	exited <-chan struct{}
	out    *syncBuffer
}

// startGateway runs bin with caddyfile until the test ends, and waits
// until it serves on port.
func startGateway(t *testing.T, bin, dir, caddyfile string, port int) *gatewayProc {
	t.Helper()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", cfg, "--adapter", "caddyfile")
	// Caddy's own data and config directories, away from the user's.
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Probe a path outside /v1, so the instance loads no policy set yet.
	probe := fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("the second gateway exited:\n%s", out.String())
		default:
		}
		if resp, err := http.Get(probe); err == nil {
			resp.Body.Close()
			return &gatewayProc{cmd: cmd, exited: exited, out: out}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second gateway did not start in 30s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer collects a subprocess's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
