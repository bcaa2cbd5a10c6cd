package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The openai npm package as a client. integration/testdata/node holds a
// package.json and package-lock.json pinning openai and ws (the Node
// WebSocket the package's Node clients use); the first test that needs
// them runs npm ci there. Without node or npm, or with the npm registry
// unreachable, the tests skip saying so.

var (
	npmOnce sync.Once
	npmErr  string
)

// nodeClients returns the directory of the node client scripts, with
// their packages installed.
func nodeClients(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed: the openai npm client is not tried", bin)
		}
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = err.Error() + ": " + string(out)
		}
	})
	if npmErr != "" {
		if registryUnreachable(npmErr) {
			t.Skipf("the npm registry is unreachable, the openai npm package could not be installed: %s", npmErr)
		}
		t.Fatalf("npm ci in %s: %s", dir, npmErr)
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
