package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock is one fenced code block of README.md or a page of docs/.
type readmeBlock struct {
	file string // relative to the module root
	line int    // of the opening fence
	lang string // the fence's info string
	text string
	skip string // the reason of a `<!-- readme-test: skip (…) -->` marker before it
}

var readmeSkip = regexp.MustCompile(`^<!-- readme-test: skip \((.+)\) -->$`)

// docFiles returns README.md and the pages of docs/, relative to the
// module root: the files whose examples and links are tested.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(moduleRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("docs/ has no pages")
	}
	files := []string{"README.md"}
	for _, p := range pages {
		files = append(files, filepath.Join("docs", filepath.Base(p)))
	}
	return files
}

// readmeBlocks returns the fenced blocks of file (relative to the module
// root). A skip marker applies to the block whose fence follows it
// directly.
func readmeBlocks(t *testing.T, file string) []readmeBlock {
	t.Helper()
	f, err := os.Open(filepath.Join(moduleRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out  []readmeBlock
		cur  *readmeBlock
		skip string
		body strings.Builder
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			cur.text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		case strings.HasPrefix(line, "```"):
			cur = &readmeBlock{file: file, line: n, lang: strings.TrimPrefix(line, "```"), skip: skip}
			body.Reset()
			skip = ""
		default:
			if m := readmeSkip.FindStringSubmatch(line); m != nil {
				skip = m[1]
			} else if strings.TrimSpace(line) != "" {
				skip = ""
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadmeExamples runs every shell, Python and Go example of README.md
// and docs/*.md that runs offline against the quick start's gateway (examples/Caddyfile
// run by the binary built from this tree) and a local OpenAI-format fake
// standing for OpenAI and Ollama (see startExampleGateway). The only
// rewrites are the addresses: localhost:8787 and localhost:2019 become the
// gateway's ports and 127.0.0.1:11434 the fake's. curl fails on any non-2xx answer here
// (--fail-with-body), so an example that answers an error fails the test.
// Blocks marked `<!-- readme-test: skip (reason) -->` are listed, not run;
// Python blocks run only when python3 can import openai (pip cannot reach
// PyPI on every CI machine).
func TestReadmeExamples(t *testing.T) {
	var blocks []readmeBlock
	for _, file := range docFiles(t) {
		blocks = append(blocks, readmeBlocks(t, file)...)
	}
	g := startExampleGateway(t)
	rewrite := strings.NewReplacer(
		"localhost:8787", fmt.Sprintf("localhost:%d", g.port),
		"127.0.0.1:11434", g.fakeHost,
		"localhost:2019", fmt.Sprintf("localhost:%d", g.adminPort),
	)
	hasPythonOpenAI := exec.Command("python3", "-c", "import openai").Run() == nil
	ran, ranDocs := 0, 0
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d_%s", b.file, b.line, b.lang)
		switch b.lang {
		case "sh", "python", "go":
		default:
			continue // configuration and output shapes, not programs
		}
		if b.skip != "" {
			t.Logf("%s: skipped by its marker: %s", name, b.skip)
			continue
		}
		t.Run(name, func(t *testing.T) {
			src := rewrite.Replace(b.text)
			switch b.lang {
			case "sh":
				runReadmeShell(t, src)
			case "python":
				if !hasPythonOpenAI {
					// Still compiled, so a syntax error fails here.
					runReadmeCommand(t, t.TempDir(), nil, "python3", "-c", "import sys; compile(sys.argv[1], 'README', 'exec')", src)
					t.Skip("python3 cannot import openai (pip install openai to run it); compiled only")
				}
				runReadmeCommand(t, t.TempDir(), nil, "python3", "-c", src)
			case "go":
				runReadmeGo(t, src)
			}
		})
		ran++
		if b.file != "README.md" {
			ranDocs++
		}
	}
	if ran < 6 || ranDocs < 3 {
		t.Fatalf("only %d examples ran, %d of them from docs/: are the fences or markers broken?", ran, ranDocs)
	}
}

// runReadmeShell runs a shell example with bash in an empty directory.
// curl is wrapped so that a non-2xx answer is a failure (and printed).
func runReadmeShell(t *testing.T, src string) {
	t.Helper()
	const prelude = "set -euo pipefail\n" +
		"curl() { command curl --fail-with-body --show-error --max-time 20 \"$@\"; }\n"
	runReadmeCommand(t, t.TempDir(), nil, "bash", "-c", prelude+src)
}

// runReadmeGo runs a Go example: a main package with `go run`, any other
// package is compiled only. It builds in a module of its own that requires
// this one (replaced by this tree) and reuses this module's go.sum, with
// the module proxy off, so it needs nothing beyond the module cache.
func runReadmeGo(t *testing.T, src string) {
	t.Helper()
	root := moduleRoot()
	dir := t.TempDir()
	goVersion := "1.26"
	// This module's requirements, every one at the version this module
	// selects: with them listed, the example's module graph is pruned as
	// this module's is, so the go command needs only the go.mod files this
	// module's build already put in the module cache, not those of older
	// versions a dependency names (a fresh cache holds only what a build
	// of this module fetched).
	var requires string
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
		if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b); m != nil {
			goVersion = string(m[1])
		}
		for _, m := range regexp.MustCompile(`(?ms)^require \((.*?)^\)`).FindAllSubmatch(b, -1) {
			requires += "require (" + string(m[1]) + ")\n\n"
		}
	}
	mod := "module readmeexample\n\ngo " + goVersion + "\n\n" +
		"require github.com/caddy-llm-gateway/caddy-llm-gateway v0.0.0\n\n" + requires +
		"replace github.com/caddy-llm-gateway/caddy-llm-gateway => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off"}
	if regexp.MustCompile(`(?m)^package main$`).MatchString(src) {
		runReadmeCommand(t, dir, env, "go", "run", ".")
		return
	}
	runReadmeCommand(t, dir, env, "go", "build", "./...")
}

// runReadmeCommand runs one example, failing the test on a non-zero exit.
func runReadmeCommand(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s failed: %v\n%s", name, err, out)
	}
	t.Logf("%s", out)
}
