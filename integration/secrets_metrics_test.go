package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// TestModelLabelsBounded sends 1,000 distinct made-up model names to a
// custom host and counts the model label values in a metrics scrape: at
// most the configured models, MaxSeenModels seen ones and "_other".
func TestModelLabelsBounded(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{LLM: "config pc-models `" + `{"provider":"openai","custom_host":"` + up.URL + `","override_params":{"model":"configured-model-x"}}` + "`"})
	// Series other tests of this process left behind stay (histograms
	// keep their series); only what this test adds is counted.
	before := modelLabels(t)
	for i := 0; i < 1000; i++ {
		resp, raw := do(t, "POST", "/chat/completions", []byte(fmt.Sprintf(`{"model":"made-up-model-%d","messages":[]}`, i)),
			"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	// A configured model keeps its own label even after the bound is hit.
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`), "x-gateway-config", "pc-models", "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 {
		t.Fatalf("configured: %d %s", resp.StatusCode, raw)
	}
	models := modelLabels(t)
	added := 0
	for m := range models {
		if !before[m] {
			added++
		}
	}
	if !models[observe.OtherLabel] {
		t.Fatalf("no %s label after 1000 models", observe.OtherLabel)
	}
	if !models["configured-model-x"] {
		t.Fatal("configured model lost its label")
	}
	// At most MaxSeenModels seen names, the configured one and _other.
	if added > observe.MaxSeenModels+2 {
		t.Fatalf("%d model label values added by 1000 models", added)
	}
	made := 0
	for m := range models {
		if strings.HasPrefix(m, "made-up-model-") {
			made++
		}
	}
	if made > observe.MaxSeenModels {
		t.Fatalf("%d made-up models labelled", made)
	}
	t.Logf("1000 models added %d model label values (%d in all)", added, len(models))
}

// modelLabels returns the model label values of the token usage metric.
func modelLabels(t *testing.T) map[string]bool {
	t.Helper()
	_, body := getAdmin(t, "/metrics")
	models := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^gen_ai_client_token_usage_count\{.*gen_ai_request_model="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		models[m[1]] = true
	}
	return models
}
