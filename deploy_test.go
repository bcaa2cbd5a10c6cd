package llmgateway

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goModFacts returns the module path and the Caddy version go.mod pins
// (without its "v").
func goModFacts(t *testing.T) (module, caddyVersion string) {
	t.Helper()
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) == 2 && fs[0] == "module":
			module = fs[1]
		case len(fs) >= 2 && fs[0] == "github.com/caddyserver/caddy/v2":
			caddyVersion = strings.TrimPrefix(fs[1], "v")
		case len(fs) >= 3 && fs[0] == "require" && fs[1] == "github.com/caddyserver/caddy/v2":
			caddyVersion = strings.TrimPrefix(fs[2], "v")
		}
	}
	if module == "" || caddyVersion == "" {
		t.Fatalf("go.mod: module %q, Caddy version %q", module, caddyVersion)
	}
	return module, caddyVersion
}

// goVersion returns go.mod's go line.
func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go line")
	return ""
}

// dockerfileInstructions returns the Dockerfile's instructions with
// continuation lines joined and comments dropped.
func dockerfileInstructions(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		out = append(out, strings.Join(strings.Fields(cur+trimmed), " "))
		cur = ""
	}
	return out
}

// TestDockerfile checks the image's build follows Caddy's documented
// pattern for this module and this Caddy: no registry is reachable here,
// so the image itself cannot be built in CI.
func TestDockerfile(t *testing.T) {
	module, version := goModFacts(t)
	ins := dockerfileInstructions(t)
	has := func(re string) bool {
		r := regexp.MustCompile(re)
		for _, in := range ins {
			if r.MatchString(in) {
				return true
			}
		}
		return false
	}
	v := regexp.QuoteMeta(version)
	gov := regexp.QuoteMeta(goVersion(t))
	musts := []struct{ what, re string }{
		{"the builder image is golang:<go.mod's go version>", `^ARG GO_IMAGE=golang:` + gov + `-alpine$`},
		{"the runtime image is caddy:<go.mod's Caddy version>", `^ARG CADDY_IMAGE=caddy:` + v + `$`},
		{"the builder stage is the Go image", `^FROM \$\{GO_IMAGE\} AS builder$`},
		{"the builder's own Go, no toolchain download", `^ENV GOTOOLCHAIN=local( |$)`},
		{"the binary is cmd/caddy (what xcaddy generates for this module)", `^RUN go build -trimpath -o /usr/bin/caddy \./cmd/caddy `},
		{"the runtime stage is the Caddy image", `^FROM \$\{CADDY_IMAGE\}$`},
		{"the binary is copied from the builder", `^COPY --from=builder /usr/bin/caddy /usr/bin/caddy$`},
		{"the example Caddyfile is the image's config", `^COPY examples/Caddyfile /etc/caddy/Caddyfile$`},
		{"a non-root user runs it", `^USER [a-z]+:[a-z]+$`},
		{"/data and /config are volumes", `^VOLUME \["/data", "/config"\]$`},
		{"a HEALTHCHECK probes /healthz", `^HEALTHCHECK .*CMD wget .*/healthz`},
	}
	for _, m := range musts {
		if !has(m.re) {
			t.Errorf("Dockerfile: %s (no instruction matches %s)", m.what, m.re)
		}
	}
	// The HEALTHCHECK's path is served by the Caddyfile the image runs.
	example, err := os.ReadFile(filepath.Join("examples", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(example), "handle /healthz {\n\t\tllm_health live\n\t}") {
		t.Error("examples/Caddyfile does not answer /healthz with llm_health live")
	}
	if has(`GOTOOLCHAIN=auto`) || has(`^RUN .*xcaddy`) {
		t.Error("Dockerfile: the build may download a Go toolchain or Caddy's sources")
	}
	if !strings.Contains(module, "caddy-llm-gateway") {
		t.Errorf("module %q", module)
	}
	if has(`^USER (root|0)`) {
		t.Error("Dockerfile: runs as root")
	}
	// Every file the runtime stage copies from the context exists and is
	// not excluded by .dockerignore.
	ignore, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		fs := strings.Fields(in)
		if fs[0] != "COPY" || strings.HasPrefix(fs[1], "--from") || fs[1] == "." {
			continue
		}
		if _, err := os.Stat(filepath.FromSlash(fs[1])); err != nil {
			t.Errorf("Dockerfile copies %s: %v", fs[1], err)
		}
		for _, pat := range strings.Split(string(ignore), "\n") {
			pat = strings.TrimSpace(pat)
			if pat != "" && !strings.HasPrefix(pat, "#") && (fs[1] == pat || strings.HasPrefix(fs[1], pat+"/")) {
				t.Errorf(".dockerignore drops %s, which the Dockerfile copies", fs[1])
			}
		}
	}
}
