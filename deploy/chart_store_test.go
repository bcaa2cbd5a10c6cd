package deploy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// dataVolume returns the pod's /data volume.
func (r *rendered) dataVolume(t *testing.T) corev1.Volume {
	t.Helper()
	for _, v := range r.deploy.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			return v
		}
	}
	t.Fatal("the pod has no data volume")
	return corev1.Volume{}
}

// TestChartPersistence: a default install (one replica, no Redis) keeps
// its API keys, virtual keys, configs, budgets and SQLite ledger on a
// PersistentVolumeClaim that survives the release's uninstall, replaced
// with Recreate so two pods never share the SQLite file; an existing claim
// is used as it is; with Redis (a cluster) or persistence off, /data is an
// emptyDir.
func TestChartPersistence(t *testing.T) {
	r := mustRender(t, nil)
	if r.pvc == nil {
		t.Fatalf("default: no PersistentVolumeClaim:\n%s", r.raw)
	}
	if got := r.pvc.Spec.Resources.Requests.Storage().String(); got != "10Gi" {
		t.Errorf("claim size %s", got)
	}
	if r.pvc.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the claim is deleted with the release: %v", r.pvc.Annotations)
	}
	v := r.dataVolume(t)
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != r.pvc.Name || v.EmptyDir != nil {
		t.Fatalf("default: /data is not the claim: %+v", v)
	}

	r = mustRender(t, map[string]any{"persistence": map[string]any{"existingClaim": "gw-data-old", "storageClass": "fast"}})
	if r.pvc != nil {
		t.Errorf("an existing claim: the chart creates another")
	}
	if v := r.dataVolume(t); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "gw-data-old" {
		t.Errorf("an existing claim: /data is %+v", v)
	}

	r = mustRender(t, map[string]any{"persistence": map[string]any{"storageClass": "fast", "size": "50Gi"}})
	if r.pvc == nil || r.pvc.Spec.StorageClassName == nil || *r.pvc.Spec.StorageClassName != "fast" ||
		r.pvc.Spec.Resources.Requests.Storage().String() != "50Gi" {
		t.Errorf("storageClass and size: %+v", r.pvc)
	}

	for name, set := range map[string]map[string]any{
		"persistence off": {"persistence": map[string]any{"enabled": false}},
		"cluster":         nil,
	} {
		files := []string(nil)
		if name == "cluster" {
			files = []string{"ci/cluster-values.yaml"}
		}
		r := mustRender(t, set, files...)
		if r.pvc != nil {
			t.Errorf("%s: a PersistentVolumeClaim is rendered", name)
		}
		if v := r.dataVolume(t); v.EmptyDir == nil {
			t.Errorf("%s: /data is %+v, want an emptyDir", name, v)
		}
	}
}

// TestChartRefusesSplitState: more than one replica needs the state every
// replica must agree on in shared stores, so values that would give each
// pod its own SQLite ledger (or its own Redis-less records) fail to render
// with a message saying why.
func TestChartRefusesSplitState(t *testing.T) {
	redis := map[string]any{"address": "redis:6379"}
	for _, tc := range []struct {
		name string
		set  map[string]any
		want string
	}{
		{"3 replicas without Redis", map[string]any{"replicaCount": 3}, "shared Redis"},
		{"3 replicas with Redis, ledger in SQLite", map[string]any{"replicaCount": 3, "redis": redis}, "shared PostgreSQL"},
		{"autoscaling with Redis, ledger in SQLite", map[string]any{"redis": redis, "autoscaling": map[string]any{"enabled": true}}, "shared PostgreSQL"},
		{"client certificate without its Secret", map[string]any{"redis": map[string]any{"address": "redis:6379", "tls": map[string]any{"enabled": true, "clientCert": true}}}, "existingSecret"},
		{"digest not sha256", map[string]any{"image": map[string]any{"digest": "latest"}}, "sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := render(t, tc.set); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("rendered (err %v), want a refusal naming %q", err, tc.want)
			}
		})
	}
	// Three replicas with Redis and the ledger off, or in PostgreSQL, render.
	for _, set := range []map[string]any{
		{"replicaCount": 3, "redis": redis, "ledger": map[string]any{"enabled": false}},
		{"replicaCount": 3, "redis": redis, "ledger": map[string]any{"postgres": map[string]any{"host": "pg"}}},
	} {
		if _, err := render(t, set); err != nil {
			t.Errorf("values %v: %v", set, err)
		}
	}
}

// TestChartIngressNetworkPolicyDigest: the Ingress reaches the Service's
// API port, the NetworkPolicy selects the pods and keeps the metrics port
// to the listed scrapers, and an image digest pins the image.
func TestChartIngressNetworkPolicyDigest(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	set := map[string]any{
		"image":   map[string]any{"repository": "registry.example/gw", "digest": digest},
		"ingress": map[string]any{"enabled": true, "className": "nginx", "tls": []any{map[string]any{"secretName": "gw-tls", "hosts": []any{"gateway.example.com"}}}},
		"networkPolicy": map[string]any{
			"enabled":     true,
			"apiFrom":     []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "apps"}}}},
			"metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}},
		},
	}
	r := mustRender(t, set)
	if img := r.container(t).Image; img != "registry.example/gw@"+digest {
		t.Errorf("image %q, want the digest reference", img)
	}
	if r.ingress == nil || len(r.ingress.Spec.Rules) != 1 || *r.ingress.Spec.IngressClassName != "nginx" || len(r.ingress.Spec.TLS) != 1 {
		t.Fatalf("ingress: %+v", r.ingress)
	}
	be := r.ingress.Spec.Rules[0].HTTP.Paths[0].Backend.Service
	if be.Name != r.service.Name || be.Port.Name != "http" {
		t.Errorf("the Ingress's backend %+v is not the Service's API port", be)
	}
	np := r.netpol
	if np == nil {
		t.Fatalf("no NetworkPolicy:\n%s", r.raw)
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if r.deploy.Spec.Template.Labels[k] != v {
			t.Errorf("the NetworkPolicy's selector %s=%s does not match the pods", k, v)
		}
	}
	if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[0].Ports[0].Port.String() != "http" ||
		np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["team"] != "apps" {
		t.Errorf("API ingress rule: %+v", np.Spec.Ingress)
	}
	if m := np.Spec.Ingress[1]; m.Ports[0].Port.String() != "metrics" || m.From[0].NamespaceSelector.MatchLabels["name"] != "monitoring" {
		t.Errorf("metrics ingress rule: %+v", m)
	}
	if len(np.Spec.Egress) != 2 {
		t.Errorf("egress: %+v", np.Spec.Egress)
	}
	// Off by default.
	if d := mustRender(t, nil); d.ingress != nil || d.netpol != nil || !strings.HasSuffix(d.container(t).Image, ":"+chartAppVersion(t)) {
		t.Errorf("default: ingress %v, netpol %v, image %s", d.ingress != nil, d.netpol != nil, d.container(t).Image)
	}
}

// TestChartRedisTLSAndPrefix: Redis TLS with a CA and a client
// certificate from a Secret, an ACL user and a key prefix reach the
// Caddyfile, which the gateway's parser adapts, and the Secret is mounted
// where the Caddyfile names its files.
func TestChartRedisTLSAndPrefix(t *testing.T) {
	set := map[string]any{"redis": map[string]any{
		"username": "gateway", "keyPrefix": "team-a:",
		"tls": map[string]any{"enabled": true, "existingSecret": "redis-tls", "clientCert": true, "serverName": "redis.internal"},
	}}
	r := mustRender(t, set, "ci/cluster-values.yaml")
	cf := r.caddyfile()
	for _, want := range []string{"\t\t\tusername gateway\n", "\t\t\tkey_prefix team-a:\n", "\t\t\ttls {\n\t\t\t\tca /etc/redis-tls/ca.crt\n\t\t\t\tcert /etc/redis-tls/tls.crt\n\t\t\t\tkey /etc/redis-tls/tls.key\n\t\t\t\tserver_name redis.internal\n\t\t\t}"} {
		if !strings.Contains(cf, want) {
			t.Errorf("the Caddyfile lacks %q:\n%s", want, cf)
		}
	}
	mounted := false
	for _, m := range r.container(t).VolumeMounts {
		mounted = mounted || (m.Name == "redis-tls" && m.MountPath == "/etc/redis-tls" && m.ReadOnly)
	}
	secret := false
	for _, v := range r.deploy.Spec.Template.Spec.Volumes {
		secret = secret || (v.Name == "redis-tls" && v.Secret != nil && v.Secret.SecretName == "redis-tls")
	}
	if !mounted || !secret {
		t.Errorf("the TLS Secret is not mounted (mount %v, volume %v)", mounted, secret)
	}
	js := adaptCaddyfile(t, "the chart's Caddyfile with Redis TLS", cf)
	for _, want := range []string{`"key_prefix":"team-a:"`, `"server_name":"redis.internal"`} {
		if !strings.Contains(js, want) {
			t.Errorf("the adapted Caddyfile lacks %s:\n%s", want, js)
		}
	}
}

// chartAppVersion is Chart.yaml's appVersion.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	r := mustRender(t, nil)
	return r.deploy.Labels["app.kubernetes.io/version"]
}
