package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of deploy/compose.yaml the test reads.
type composeFile struct {
	Services map[string]struct {
		Image string `json:"image"`
		Build struct {
			Context    string `json:"context"`
			Dockerfile string `json:"dockerfile"`
		} `json:"build"`
		Deploy struct {
			Replicas int `json:"replicas"`
		} `json:"deploy"`
		Ports       []string          `json:"ports"`
		Volumes     []string          `json:"volumes"`
		Environment map[string]string `json:"environment"`
		DependsOn   map[string]struct {
			Condition string `json:"condition"`
		} `json:"depends_on"`
		StopGracePeriod string `json:"stop_grace_period"`
		Healthcheck     struct {
			Test []string `json:"test"`
		} `json:"healthcheck"`
	} `json:"services"`
}

// caddyfileDuration reads a global option's duration from a Caddyfile.
func caddyfileDuration(t *testing.T, cf, option string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\t` + option + ` (\S+)$`).FindStringSubmatch(cf)
	if m == nil {
		t.Fatalf("the Caddyfile sets no %s", option)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCompose checks deploy/compose.yaml is wired as docs/deploy.md
// describes: three gateway replicas from the repository's Dockerfile
// sharing Redis and PostgreSQL (started healthy first), readiness as the
// health check, a stop grace longer than the Caddyfile's drain, secrets
// only from the environment, and a load balancer of the pinned Caddy.
func TestCompose(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	gw, ok := c.Services["gateway"]
	if !ok {
		t.Fatal("no gateway service")
	}
	if gw.Build.Context != ".." || gw.Build.Dockerfile != "Dockerfile" || gw.Deploy.Replicas != 3 || len(gw.Ports) != 0 {
		t.Errorf("gateway: build %+v, replicas %d, ports %v", gw.Build, gw.Deploy.Replicas, gw.Ports)
	}
	for _, dep := range []string{"redis", "postgres"} {
		if _, ok := c.Services[dep]; !ok {
			t.Errorf("no %s service", dep)
		}
		if gw.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("the gateway does not wait for %s to be healthy", dep)
		}
	}
	if !strings.Contains(strings.Join(gw.Healthcheck.Test, " "), "http://127.0.0.1:8787/readyz") {
		t.Errorf("gateway health check: %v", gw.Healthcheck.Test)
	}
	if !strings.Contains(strings.Join(gw.Volumes, " "), "./compose/Caddyfile:/etc/caddy/Caddyfile:ro") {
		t.Errorf("gateway volumes: %v", gw.Volumes)
	}

	// The Caddyfile shares Redis and PostgreSQL by their service names,
	// and compose waits longer than it drains.
	cfb, err := os.ReadFile("compose/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cf := string(cfb)
	for _, want := range []string{"\t\tredis redis:6379 {", `ledger "postgres://gateway:{env.LEDGER_DB_PASSWORD}@postgres:5432/llm?`} {
		if !strings.Contains(cf, want) {
			t.Errorf("compose/Caddyfile lacks %q", want)
		}
	}
	drain := caddyfileDuration(t, cf, "shutdown_delay") + caddyfileDuration(t, cf, "grace_period")
	stop, err := time.ParseDuration(gw.StopGracePeriod)
	if err != nil || stop <= drain {
		t.Errorf("stop_grace_period %q is not longer than shutdown_delay + grace_period (%s)", gw.StopGracePeriod, drain)
	}

	// Secrets are interpolated from the environment, never written here.
	interp := regexp.MustCompile(`^\$\{[A-Z_]+(:[?-][^}]*)?\}$`)
	for name, svc := range c.Services {
		for k, v := range svc.Environment {
			secretish := strings.Contains(k, "KEY") || strings.Contains(k, "PASSWORD") || strings.Contains(k, "AUTH")
			if secretish && !interp.MatchString(v) {
				t.Errorf("%s: %s is not taken from the environment: %q", name, k, v)
			}
		}
	}
	if gw.Environment["LEDGER_DB_PASSWORD"] != "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" ||
		!strings.HasPrefix(c.Services["postgres"].Environment["POSTGRES_PASSWORD"], "${POSTGRES_PASSWORD") {
		t.Errorf("the gateway and PostgreSQL do not share one password variable")
	}

	// The load balancer is the Caddy go.mod pins, the only published port.
	_, version := rootGoMod(t)
	if lb := c.Services["lb"]; lb.Image != "caddy:"+version || len(lb.Ports) != 1 {
		t.Errorf("lb: image %q (want caddy:%s), ports %v", lb.Image, version, lb.Ports)
	}
}

// rootGoMod returns the gateway module's path and pinned Caddy version.
func rootGoMod(t *testing.T) (module, caddyVersion string) {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 2 && fs[0] == "module" {
			module = fs[1]
		}
		if len(fs) >= 2 && fs[0] == "github.com/caddyserver/caddy/v2" {
			caddyVersion = strings.TrimPrefix(fs[1], "v")
		}
	}
	if module == "" || caddyVersion == "" {
		t.Fatal("../go.mod: no module path or Caddy version")
	}
	return module, caddyVersion
}
