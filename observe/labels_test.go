package observe

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestModelLabelBound(t *testing.T) {
	m := NewLabelSet(3)
	m.SetConfigured([]string{"gpt-configured"})
	tests := []struct{ in, want string }{
		{"a", "a"},
		{"b", "b"},
		{"a", "a"},
		{"c", "c"},
		{"d", OtherLabel}, // past the bound
		{"b", "b"},        // seen before the bound: kept
		{"gpt-configured", "gpt-configured"},
		{"", ""},
		{strings.Repeat("x", MaxLabelBytes+1), OtherLabel},
		{"bad\xffutf8", OtherLabel},
	}
	for _, tt := range tests {
		if got := m.Bound(tt.in); got != tt.want {
			t.Errorf("Bound(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// A reload replaces the configured set but keeps the seen one.
	m.SetConfigured([]string{"other-configured"})
	if got := m.Bound("gpt-configured"); got != OtherLabel {
		t.Errorf("dropped configured model still labelled %q", got)
	}
	if got := m.Bound("a"); got != "a" {
		t.Errorf("seen model lost on reload: %q", got)
	}
}

// TestModelsLabelKnownOnly checks the process's model label set: only
// declared names (configuration and price catalog) keep their value, a
// client's first made-up names included (before the fix the first 100
// seen kept theirs), and the lookup allocates nothing.
func TestModelsLabelKnownOnly(t *testing.T) {
	old := *Models.configured.Load()
	t.Cleanup(func() { Models.configured.Store(&old) })
	SetConfiguredModels([]string{"configured-model", "gpt-4o-mini"})
	AllowModels("prompt-file-model")
	for in, want := range map[string]string{
		"configured-model":  "configured-model",
		"gpt-4o-mini":       "gpt-4o-mini",
		"prompt-file-model": "prompt-file-model",
		"made-up-1":         OtherLabel,
		"made-up-2":         OtherLabel,
		"":                  "",
	} {
		if got := Models.Bound(in); got != want {
			t.Errorf("Models.Bound(%q) = %q, want %q", in, got, want)
		}
	}
	made := strings.Clone("made-up-3")
	if n := testing.AllocsPerRun(100, func() { _ = Models.Bound(made) }); n != 0 {
		t.Errorf("Bound of an unknown model allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Models.Bound("gpt-4o-mini") }); n != 0 {
		t.Errorf("Bound of a known model allocates %v times", n)
	}
}

func TestModelsInConfig(t *testing.T) {
	cfg := `{"strategy":{"mode":"fallback"},"override_params":{"model":"top"},
	  "targets":[{"provider":"openai","override_params":{"model":"gpt-4o"}},
	             {"strategy":{"mode":"loadbalance"},"targets":[{"provider":"anthropic","override_params":{"model":"claude-x","temperature":1}}]}]}`
	got := ModelsInConfig([]byte(cfg))
	sort.Strings(got)
	if want := []string{"claude-x", "gpt-4o", "top"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("models %v, want %v", got, want)
	}
}

// TestTokenUsageSeriesBounded records answers for 1,000 distinct model
// names and counts the series the token histogram exports.
func TestTokenUsageSeriesBounded(t *testing.T) {
	var slug string
	for _, s := range []string{"openai", "groq", "anthropic"} {
		if _, ok := providers.Lookup(s); ok {
			slug = s
			break
		}
	}
	start := time.Now()
	for i := 0; i < 1000; i++ {
		e := &Entry{Provider: "not-a-provider-" + fmt.Sprint(i), Operation: "chat.completions", Status: 200, Start: start,
			Model: fmt.Sprintf("made-up-model-%d", i), Usage: &providers.Usage{PromptTokens: 1, CompletionTokens: 1}}
		if slug != "" && i%2 == 0 {
			e.Provider = slug
		}
		e.record(start)
	}
	// 2 token types × (MaxSeenModels + "_other") × at most 2 providers.
	if n := series(t, genaiTokenUsage); n > 2*(MaxSeenModels+1)*2 {
		t.Fatalf("%d token usage series for 1000 models", n)
	}
	if n := series(t, requestsTotal); n > 2 {
		t.Fatalf("%d request series: provider label not bounded", n)
	}
}

// series counts the label sets c exports.
func series(t *testing.T, c prometheus.Collector) int {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}
