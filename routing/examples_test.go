package routing

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// exampleResolver serves one saved config and resolves every virtual key
// name, as the example Caddyfile's keys would.
type exampleResolver struct{ config []byte }

func (r exampleResolver) SavedConfig(string) ([]byte, bool) { return r.config, true }

func (exampleResolver) VirtualKey(string) (*providers.Settings, bool) {
	return &providers.Settings{Provider: "openai", APIKey: "sk-example"}, true
}

// TestExampleConfigs builds a plan from every example config, so the
// examples cannot drift from what the gateway accepts.
func TestExampleConfigs(t *testing.T) {
	files, _ := filepath.Glob("../examples/configs/*.json")
	if len(files) == 0 {
		t.Skip("no example configs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set("x-gateway-config", "example")
			in, err := ingress.Parse(h)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Resolve(in, exampleResolver{raw}, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}
