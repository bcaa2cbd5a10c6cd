package deploy

import (
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestChartLint runs `helm lint`'s checks (Chart.yaml, values, templates
// rendered and parsed as Kubernetes objects) with the default and the
// cluster values: no warning or error.
func TestChartLint(t *testing.T) {
	for _, files := range [][]string{nil, {"ci/cluster-values.yaml"}} {
		vals := map[string]any{}
		for _, f := range files {
			v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
			if err != nil {
				t.Fatal(err)
			}
			vals = v.AsMap()
		}
		l := lint.All(chartDir, vals, "llm", false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint with %v: %s", files, m)
			} else {
				t.Logf("helm lint with %v: %s", files, m)
			}
		}
	}
}
