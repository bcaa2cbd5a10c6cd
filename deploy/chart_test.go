package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/caddy-llm-gateway"

// rendered is a chart rendered with a set of values, decoded by kind.
type rendered struct {
	deploy     *appsv1.Deployment
	service    *corev1.Service
	configMaps []*corev1.ConfigMap
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	monitor    map[string]any
	pvc        *corev1.PersistentVolumeClaim
	ingress    *networkingv1.Ingress
	netpol     *networkingv1.NetworkPolicy
	raw        string
}

// render renders the chart as `helm template` would, with the values of
// valuesFiles (relative to the chart) and then set merged over its
// defaults.
func render(t *testing.T, set map[string]any, valuesFiles ...string) (*rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatal(err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	vals = chartutil.CoalesceTables(set, vals)
	opts := chartutil.ReleaseOptions{Name: "gw", Namespace: "llm", IsInstall: true, Revision: 1}
	top, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &rendered{}
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			out.raw += "\n---\n" + doc
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			var into any
			switch head.Kind {
			case "Deployment":
				out.deploy = new(appsv1.Deployment)
				into = out.deploy
			case "Service":
				out.service = new(corev1.Service)
				into = out.service
			case "ConfigMap":
				cm := new(corev1.ConfigMap)
				out.configMaps = append(out.configMaps, cm)
				into = cm
			case "PodDisruptionBudget":
				out.pdb = new(policyv1.PodDisruptionBudget)
				into = out.pdb
			case "HorizontalPodAutoscaler":
				out.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
				into = out.hpa
			case "ServiceMonitor":
				out.monitor = map[string]any{}
				into = &out.monitor
			case "PersistentVolumeClaim":
				out.pvc = new(corev1.PersistentVolumeClaim)
				into = out.pvc
			case "Ingress":
				out.ingress = new(networkingv1.Ingress)
				into = out.ingress
			case "NetworkPolicy":
				out.netpol = new(networkingv1.NetworkPolicy)
				into = out.netpol
			case "":
				continue
			default:
				t.Fatalf("%s renders an unexpected kind %q", name, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
		}
	}
	if out.deploy == nil || out.service == nil || len(out.configMaps) != 1 {
		t.Fatalf("the chart renders no Deployment, Service or ConfigMap:\n%s", out.raw)
	}
	return out, nil
}

func mustRender(t *testing.T, set map[string]any, valuesFiles ...string) *rendered {
	t.Helper()
	r, err := render(t, set, valuesFiles...)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return r
}

func (r *rendered) caddyfile() string { return r.configMaps[0].Data["Caddyfile"] }

func (r *rendered) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := r.deploy.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%d containers", len(cs))
	}
	return cs[0]
}

// TestChart renders the chart with its default values (one replica, no
// shared store) and with ci/cluster-values.yaml (three or more replicas,
// Redis, PostgreSQL, autoscaling, ServiceMonitor) and checks what a
// cluster depends on: probes on the llm_health endpoints, ports, drain
// settings that add up, the PDB, the HPA's slow scale-down, and secrets
// only from the Secret.
func TestChart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		cluster bool
	}{
		{name: "default"},
		{name: "cluster", files: []string{"ci/cluster-values.yaml"}, cluster: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, nil, tc.files...)
			c := r.container(t)
			spec := r.deploy.Spec.Template.Spec

			// Ports and probes.
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["http"] != 8787 || ports["metrics"] != 9180 {
				t.Errorf("container ports %v", ports)
			}
			probes := []struct {
				what string
				p    *corev1.Probe
				path string
			}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}}
			for _, p := range probes {
				if p.p == nil || p.p.HTTPGet == nil || p.p.HTTPGet.Path != p.path || p.p.HTTPGet.Port.String() != "http" {
					t.Errorf("%s probe: %+v", p.what, p.p)
				}
			}
			svc := map[string]string{}
			for _, p := range r.service.Spec.Ports {
				svc[p.Name] = fmt.Sprint(p.Port, "->", p.TargetPort.String())
			}
			if svc["http"] != "8787->http" || svc["metrics"] != "9180->metrics" {
				t.Errorf("service ports %v", svc)
			}

			// The Caddyfile serves the probes the Deployment names, on
			// the ports it names.
			cf := r.caddyfile()
			for _, want := range []string{":8787 {", "handle /healthz {\n\t\tllm_health live", "handle /readyz {\n\t\tllm_health ready", ":9180 {\n\tmetrics /metrics"} {
				if !strings.Contains(cf, want) {
					t.Errorf("the Caddyfile lacks %q:\n%s", want, cf)
				}
			}

			// Drain: preStop sleeps, Caddy's grace period comes from the
			// values, and the kubelet waits for all of it.
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
				strings.Join(c.Lifecycle.PreStop.Exec.Command, " ") != "sleep 10" {
				t.Errorf("preStop: %+v", c.Lifecycle)
			}
			if !strings.Contains(cf, "\tgrace_period 300s\n") || !strings.Contains(cf, "\tshutdown_delay 0s\n") {
				t.Errorf("the Caddyfile's drain settings:\n%s", cf)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || *g != 10+0+300+15 {
				t.Errorf("terminationGracePeriodSeconds = %v, want preStop + shutdown_delay + grace_period + margin = 325", g)
			}
			if tc.cluster {
				if s := r.deploy.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable.IntValue() != 0 {
					t.Errorf("rolling update: %+v", s)
				}
			} else if r.deploy.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("default (one replica on a ReadWriteOnce volume): strategy %q, want Recreate", r.deploy.Spec.Strategy.Type)
			}

			// Non-root, read-only root file system.
			if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
				t.Errorf("pod security context: %+v", psc)
			}
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("container security context: %+v", sc)
			}

			// The PDB selects the pods and never blocks a drain.
			if r.pdb == nil || r.pdb.Spec.MaxUnavailable == nil || r.pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Fatalf("PDB: %+v", r.pdb)
			}
			for k, v := range r.pdb.Spec.Selector.MatchLabels {
				if r.deploy.Spec.Template.Labels[k] != v {
					t.Errorf("the PDB's selector %s=%s does not match the pods", k, v)
				}
			}

			// The ConfigMap's checksum annotation rolls the pods.
			sum := r.deploy.Spec.Template.Annotations["checksum/config"]
			other := mustRender(t, map[string]any{"drain": map[string]any{"gracePeriodSeconds": 600}}, tc.files...)
			if len(sum) != 64 || other.deploy.Spec.Template.Annotations["checksum/config"] == sum {
				t.Errorf("checksum/config %q does not follow the Caddyfile", sum)
			}

			if !tc.cluster {
				if *r.deploy.Spec.Replicas != 1 || r.hpa != nil || r.monitor != nil || strings.Contains(cf, "redis ") {
					t.Errorf("default: replicas %d, hpa %v, monitor %v, Caddyfile:\n%s", *r.deploy.Spec.Replicas, r.hpa != nil, r.monitor != nil, cf)
				}
				if !strings.Contains(cf, "\t\tledger {\n\t\t\tretention 90d") {
					t.Errorf("default: the ledger is not the pod's SQLite file:\n%s", cf)
				}
				return
			}
			if r.deploy.Spec.Replicas != nil {
				t.Errorf("cluster: the Deployment sets replicas (%d) although the HPA owns them", *r.deploy.Spec.Replicas)
			}
			for _, want := range []string{
				"\t\tredis redis.data.svc.cluster.local:6379 {\n\t\t\tpassword {env.REDIS_PASSWORD}\n",
				"\t\tledger \"postgres://gateway:{env.LEDGER_DB_PASSWORD}@postgres.data.svc.cluster.local:5432/llm?sslmode=disable\" {",
			} {
				if !strings.Contains(cf, want) {
					t.Errorf("cluster: the Caddyfile lacks %q:\n%s", want, cf)
				}
			}
			h := r.hpa
			if h == nil || *h.Spec.MinReplicas != 3 || h.Spec.Behavior == nil || h.Spec.Behavior.ScaleDown == nil ||
				h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds == nil || *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds < 300 ||
				h.Spec.ScaleTargetRef.Name != r.deploy.Name {
				t.Fatalf("cluster HPA: %+v", h)
			}
			eps, _ := r.monitor["spec"].(map[string]any)["endpoints"].([]any)
			if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" || eps[0].(map[string]any)["path"] != "/metrics" {
				t.Errorf("ServiceMonitor endpoints: %v", eps)
			}
		})
	}
}

// TestChartSecrets: secrets reach the pod only as secretKeyRef variables
// and the Caddyfile only as {env.VAR} placeholders, so a ConfigMap never
// holds one, whatever the values name.
func TestChartSecrets(t *testing.T) {
	set := map[string]any{
		"virtualKeys": map[string]any{
			"openai":    map[string]any{"provider": "openai", "apiKeyEnv": "OPENAI_API_KEY"},
			"anthropic": map[string]any{"provider": "anthropic", "apiKeyEnv": "ANTHROPIC_API_KEY"},
		},
		"secrets": map[string]any{"existingSecret": "llm-secrets"},
	}
	r := mustRender(t, set, "ci/cluster-values.yaml")
	c := r.container(t)
	vals, _ := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	secretEnv, _ := vals["secrets"].(map[string]any)["env"].(map[string]any)
	if len(secretEnv) == 0 {
		t.Fatal("values.yaml names no secret")
	}
	for name := range secretEnv {
		found := false
		for _, e := range c.Env {
			if e.Name != name {
				continue
			}
			found = true
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "llm-secrets" {
				t.Errorf("%s is not read from the Secret: %+v", name, e)
			}
		}
		if !found {
			t.Errorf("%s is not in the pod's environment", name)
		}
	}
	// Every credential the Caddyfile gives is a placeholder.
	cf := r.caddyfile()
	for _, line := range strings.Split(cf, "\n") {
		fs := strings.Fields(line)
		// The secret is the last argument ("api_key <name> <key>" in the
		// llm block, "api_key <key>" in a virtual key).
		if len(fs) >= 2 && (fs[0] == "api_key" || fs[0] == "password" || fs[0] == "encryption_key") &&
			!(strings.HasPrefix(fs[len(fs)-1], "{env.") && strings.HasSuffix(fs[len(fs)-1], "}")) {
			t.Errorf("a credential in the Caddyfile is not a placeholder: %q", line)
		}
		if len(fs) >= 2 && fs[0] == "ledger" && strings.Contains(fs[1], "@") && !strings.Contains(fs[1], ":{env.LEDGER_DB_PASSWORD}@") {
			t.Errorf("the ledger's URL holds a password: %q", line)
		}
	}
	for _, want := range []string{"api_key {env.OPENAI_API_KEY}", "api_key {env.ANTHROPIC_API_KEY}", "encryption_key {env.GATEWAY_ENCRYPTION_KEY}", "api_key default {env.GATEWAY_API_KEY}"} {
		if !strings.Contains(cf, want) {
			t.Errorf("the Caddyfile lacks %q:\n%s", want, cf)
		}
	}
	// Nothing that looks like a key anywhere in a ConfigMap.
	for _, cm := range r.configMaps {
		for k, v := range cm.Data {
			for _, marker := range []string{"sk-", "-----BEGIN", "AKIA"} {
				if strings.Contains(v, marker) {
					t.Errorf("ConfigMap %s/%s holds %q", cm.Name, k, marker)
				}
			}
		}
	}
}

// TestChartRefusesSharedNothingCluster: more than one replica, or
// autoscaling, without a shared Redis fails to render instead of running
// replicas that each enforce their own limits.
func TestChartRefusesSharedNothingCluster(t *testing.T) {
	for _, set := range []map[string]any{
		{"replicaCount": 3},
		{"autoscaling": map[string]any{"enabled": true}},
	} {
		if _, err := render(t, set); err == nil || !strings.Contains(err.Error(), "shared Redis") {
			t.Errorf("values %v rendered (err %v)", set, err)
		}
	}
}

var (
	caddyOnce sync.Once
	caddyBin  string
	caddyErr  error
)

// gatewayBinary builds the gateway's Caddy (../cmd/caddy) once.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	caddyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "deploy-caddy")
		if err != nil {
			caddyErr = err
			return
		}
		caddyBin = filepath.Join(dir, "caddy")
		cmd := exec.Command("go", "build", "-o", caddyBin, "./cmd/caddy")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			caddyErr = fmt.Errorf("building the gateway: %v\n%s", err, out)
		}
	})
	if caddyErr != nil {
		t.Fatal(caddyErr)
	}
	return caddyBin
}

// adaptCaddyfile runs the gateway's `caddy adapt` on cf: the directives
// and options must parse as the gateway's own Caddyfile parsers read them.
func adaptCaddyfile(t *testing.T, name, cf string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(cf), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gatewayBinary(t), "adapt", "--config", path, "--adapter", "caddyfile").CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not adapt: %v\n%s\n%s", name, err, out, cf)
	}
	return string(out)
}

// TestCaddyfilesAdapt: the chart's Caddyfile (both value sets) and the
// compose file's Caddyfile adapt with the gateway's parsers.
func TestCaddyfilesAdapt(t *testing.T) {
	for _, files := range [][]string{nil, {"ci/cluster-values.yaml"}} {
		r := mustRender(t, nil, files...)
		js := adaptCaddyfile(t, fmt.Sprint("the chart's Caddyfile with ", files), r.caddyfile())
		for _, want := range []string{`"handler":"llm_health"`, `"check":"ready"`, `"grace_period":300000000000`} {
			if !strings.Contains(js, want) {
				t.Errorf("the adapted chart Caddyfile lacks %s:\n%s", want, js)
			}
		}
	}
	b, err := os.ReadFile("compose/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	js := adaptCaddyfile(t, "compose/Caddyfile", string(b))
	for _, want := range []string{`"check":"live"`, `"check":"ready"`, `"shutdown_delay":5000000000`, `"grace_period":120000000000`} {
		if !strings.Contains(js, want) {
			t.Errorf("the adapted compose Caddyfile lacks %s:\n%s", want, js)
		}
	}
}
