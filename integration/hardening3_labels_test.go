package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// modelSeries matches a metric series carrying a model label, capturing
// the value.
var modelSeries = regexp.MustCompile(`gen_ai_request_model="([^"]*)"`)

// TestHardening3ModelLabelsKnownOnly sends 100 made-up model names to a
// custom host, then a model of the price catalog nobody configured and
// one a saved config names, and compares the metric series before and
// after: the made-up names add no series but "_other" ones (before the
// fix the first 100 names seen each got their own, ~51 series a name),
// while the priced and the configured model keep their own value.
func TestHardening3ModelLabelsKnownOnly(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{LLM: "config h3-models `" + `{"provider":"openai","custom_host":"` + up.URL + `","override_params":{"model":"h3-configured-model"}}` + "`"})
	before := scrapeMetrics(t)
	for i := 0; i < 100; i++ {
		resp, raw := do(t, "POST", "/chat/completions", []byte(fmt.Sprintf(`{"model":"h3-made-up-%d","messages":[{"role":"user","content":"hi"}]}`, i)),
			"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	after := scrapeMetrics(t)
	added := map[string]int{}
	for series := range after {
		if _, ok := before[series]; ok {
			continue
		}
		if m := modelSeries.FindStringSubmatch(series); m != nil {
			added[m[1]]++
		}
	}
	for model, n := range added {
		if model != observe.OtherLabel {
			t.Errorf("model %q added %d series", model, n)
		}
	}
	t.Logf("100 made-up models added %d series, all %s", added[observe.OtherLabel], observe.OtherLabel)

	// A priced model and a configured one keep their own label value.
	for _, c := range []struct{ model, header, value string }{
		{"gpt-4o-mini", "x-gateway-custom-host", up.URL},
		{"m", "x-gateway-config", "h3-models"},
	} {
		headers := []string{c.header, c.value, "Authorization", "Bearer sk-test-provider"}
		if c.header == "x-gateway-custom-host" {
			headers = append(headers, "x-gateway-provider", "openai")
		}
		resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"`+c.model+`","messages":[{"role":"user","content":"hi"}]}`), headers...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.model, resp.StatusCode, raw)
		}
	}
	labels := map[string]bool{}
	for series := range scrapeMetrics(t) {
		if m := modelSeries.FindStringSubmatch(series); m != nil {
			labels[m[1]] = true
			if strings.HasPrefix(m[1], "h3-made-up-") {
				t.Errorf("series %s", series)
			}
		}
	}
	for _, want := range []string{"gpt-4o-mini", "h3-configured-model", observe.OtherLabel} {
		if !labels[want] {
			t.Errorf("no series labelled %q", want)
		}
	}
}
