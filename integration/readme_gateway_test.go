package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeOpenAIKey is the provider key the example gateway's `openai`
// virtual key reads from OPENAI_API_KEY in these tests.
const readmeOpenAIKey = "sk-readme-example-secret-31337"

// exampleGateway is the README's quick-start gateway: the binary built
// from ./cmd/caddy running examples/Caddyfile with the quick start's
// environment, in its own process (as a user runs it), with its own
// storage, autosave and ports.
type exampleGateway struct {
	bin, dir        string
	port, adminPort int
	env             []string
	out             *syncBuffer
	fake            *fakeOpenAI
	fakeHost        string // host:port of fake
}

// startExampleGateway copies examples/ to a temporary directory and runs
// it. Two addresses are redirected to a local OpenAI-format fake, so the
// examples run offline: the Ollama address every example uses
// (127.0.0.1:11434, in the configs and the commands of README.md and docs/) and the
// `openai` virtual key, which gets a custom_host line. Nothing else of the
// example changes.
func startExampleGateway(t *testing.T) *exampleGateway {
	t.Helper()
	g := &exampleGateway{bin: buildGateway(t), dir: t.TempDir(), fake: newFakeOpenAI(t)}
	g.fakeHost = strings.TrimPrefix(g.fake.URL, "http://")
	// The fake answers the key it knows; the example's requests carry the
	// virtual key's (checked by the tests) or none (Ollama needs none).
	g.fake.Hook = func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if a := r.Header.Get("Authorization"); a == "" || a == "Bearer "+readmeOpenAIKey {
			r.Header.Set("Authorization", "Bearer sk-test-provider")
		}
		return false
	}
	root := moduleRoot()
	for _, sub := range []string{"examples", "examples/configs", "examples/prompts"} {
		entries, err := os.ReadDir(filepath.Join(root, sub))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(g.dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(root, sub, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			s := strings.ReplaceAll(string(b), "127.0.0.1:11434", g.fakeHost)
			if sub == "examples" && e.Name() == "Caddyfile" {
				const vk = "virtual_key openai {\n\t\t\tprovider openai\n"
				if !strings.Contains(s, vk) {
					t.Fatalf("examples/Caddyfile has no %q block to point at the fake", vk)
				}
				s = strings.Replace(s, vk, vk+"\t\t\tcustom_host "+g.fake.URL+"\n", 1)
			}
			if err := os.WriteFile(filepath.Join(g.dir, sub, e.Name()), []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	g.port, g.adminPort = freePort(), freePort()
	g.env = append(os.Environ(),
		"GATEWAY_API_KEY=dev-key", "OPENAI_API_KEY="+readmeOpenAIKey,
		fmt.Sprintf("GATEWAY_PORT=%d", g.port), fmt.Sprintf("GATEWAY_ADMIN_PORT=%d", g.adminPort),
		"XDG_DATA_HOME="+filepath.Join(g.dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(g.dir, "config"))
	cmd := exec.Command(g.bin, "run", "--config", "examples/Caddyfile")
	cmd.Dir, cmd.Env = g.dir, g.env
	g.out = new(syncBuffer)
	cmd.Stdout, cmd.Stderr = g.out, g.out
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
	probe := fmt.Sprintf("http://127.0.0.1:%d/", g.port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("the example gateway exited:\n%s", g.out.String())
		default:
		}
		if resp, err := http.Get(probe); err == nil {
			resp.Body.Close()
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example gateway did not start in 30s:\n%s", g.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chat sends one chat completion through the example's `openai` virtual
// key and returns the status.
func (g *exampleGateway) chat(t *testing.T) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", g.port),
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-gateway-api-key", "dev-key")
	req.Header.Set("x-gateway-virtual-key", "openai")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// adminConfig returns GET /config/ of the example gateway's admin API.
func (g *exampleGateway) adminConfig(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/config/", g.adminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestReadmeExampleKeepsSecretsOutOfAdminAPI: the example Caddyfile gives
// the provider key as {env.OPENAI_API_KEY}, resolved by the gateway when
// it loads, so neither the admin API's config nor Caddy's autosave.json
// holds the key (with Caddy's {$OPENAI_API_KEY} form both did), a request
// still reaches the provider with it, and the README's reload command
// keeps it so.
func TestReadmeExampleKeepsSecretsOutOfAdminAPI(t *testing.T) {
	g := startExampleGateway(t)
	autosave := filepath.Join(g.dir, "config", "caddy", "autosave.json")
	check := func(stage string) {
		t.Helper()
		if code := g.chat(t); code != http.StatusOK {
			t.Fatalf("%s: chat through the openai virtual key: %d\n%s", stage, code, g.out.String())
		}
		if got := g.fake.last().Header.Get("Authorization"); got != "Bearer "+readmeOpenAIKey {
			t.Fatalf("%s: the provider got Authorization %q, want the virtual key's", stage, got)
		}
		cfg := g.adminConfig(t)
		if strings.Contains(cfg, readmeOpenAIKey) {
			t.Fatalf("%s: GET /config/ holds the provider key", stage)
		}
		if !strings.Contains(cfg, "{env.OPENAI_API_KEY}") {
			t.Fatalf("%s: GET /config/ lacks the placeholder:\n%s", stage, cfg)
		}
		saved, err := os.ReadFile(autosave)
		if err != nil {
			t.Fatalf("%s: autosave: %v", stage, err)
		}
		if strings.Contains(string(saved), readmeOpenAIKey) || !strings.Contains(string(saved), "{env.OPENAI_API_KEY}") {
			t.Fatalf("%s: autosave.json holds the key or lacks the placeholder", stage)
		}
		out := g.out.String()
		if strings.Contains(out, readmeOpenAIKey) {
			t.Fatalf("%s: the gateway's output holds the provider key", stage)
		}
		if strings.Contains(out, "literal credential") {
			t.Fatalf("%s: the example warns about a literal credential:\n%s", stage, out)
		}
	}
	check("after start")

	// The README's reload command, with the binary the test built.
	cmd := exec.Command(g.bin, "reload", "--config", "examples/Caddyfile", "--address", fmt.Sprintf("localhost:%d", g.adminPort), "--force")
	cmd.Dir, cmd.Env = g.dir, g.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	check("after reload")
}

// TestReadmeExampleHasTheLedger: the quick start's gateway keeps the usage
// ledger (embedded, in Caddy's data directory), so the console's first
// pages, Overview and Logs, work from the first run: after one chat the
// logs API answers 200 with that request's record, not 404
// ledger_not_configured, and the SQLite file is in the data directory.
func TestReadmeExampleHasTheLedger(t *testing.T) {
	g := startExampleGateway(t)
	if code := g.chat(t); code != http.StatusOK {
		t.Fatalf("chat: %d\n%s", code, g.out.String())
	}
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/v1/logs", g.port), nil)
		req.Header.Set("x-gateway-api-key", "dev-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/logs on the quick start: %d %s", resp.StatusCode, body)
		}
		// The writer flushes off the request path: poll for the record.
		if strings.Contains(body, "gpt-4o-mini") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(body, "gpt-4o-mini") {
		t.Fatalf("the quick start's ledger has no record of the chat: %s", body)
	}
	found := false
	_ = filepath.WalkDir(filepath.Join(g.dir, "data"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".db") {
			found = true
		}
		return nil
	})
	if !found {
		t.Fatalf("no SQLite ledger file under the data directory %s", filepath.Join(g.dir, "data"))
	}
}
