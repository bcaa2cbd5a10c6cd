package integration

import (
	"strings"
	"testing"
)

// TestSavedConfigValidatedAtLoad: docs/caddyfile.md says a Caddy config with an
// invalid saved config fails to load, naming the id and the rule. Besides
// the schema, that covers what a request naming the config would meet: an
// unknown provider or virtual key, a conditional query or target name the
// router refuses, a load balance with no weight. A saved config may leave
// the provider to the client's header, so a leaf without one still loads.
func TestSavedConfigValidatedAtLoad(t *testing.T) {
	const vk = "virtual_key vk-ok {\n\t\t\tprovider openai\n\t\t\tapi_key {env.TEST_GATEWAY_KEY}\n\t\t}\n\t\t"
	tests := []struct {
		name, config string
		want         []string // in the load error; nil: the config loads
	}{
		{
			name:   "unknown provider",
			config: `{"provider":"no-such-provider","api_key":"{env.TEST_GATEWAY_KEY}"}`,
			want:   []string{`config "saved"`, "config.provider", `unknown provider "no-such-provider"`},
		},
		{
			name:   "unknown provider in a fallback target",
			config: `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"vk-ok"},{"provider":"opneai","custom_host":"http://127.0.0.1:9"}]}`,
			want:   []string{`config "saved"`, "config.targets[1].provider", `unknown provider "opneai"`},
		},
		{
			name:   "unknown virtual key",
			config: `{"strategy":{"mode":"loadbalance"},"targets":[{"virtual_key":"vk-ok"},{"virtual_key":"vk-missing"}]}`,
			want:   []string{`config "saved"`, `virtual key "vk-missing" not found`, "config.targets[1]"},
		},
		{
			name:   "conditional target name unknown",
			config: `{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.plan":"paid"},"then":"smart"}],"default":"cheap"},"targets":[{"name":"cheap","virtual_key":"vk-ok"}]}`,
			want:   []string{`config "saved"`, "smart"},
		},
		{
			name:   "conditional operator unknown",
			config: `{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.plan":{"$like":"p"}},"then":"cheap"}],"default":"cheap"},"targets":[{"name":"cheap","virtual_key":"vk-ok"}]}`,
			want:   []string{`config "saved"`, "config.strategy.conditions[0].query", "$like"},
		},
		{
			name:   "load balance without weight",
			config: `{"strategy":{"mode":"loadbalance"},"targets":[{"virtual_key":"vk-ok","weight":0},{"virtual_key":"vk-ok","weight":0}]}`,
			want:   []string{`config "saved"`, "loadbalance needs at least one target with a weight above 0"},
		},
		{
			name:   "schema violation",
			config: `{"strategy":{"mode":"sometimes"},"targets":[{"virtual_key":"vk-ok"}]}`,
			want:   []string{`config "saved"`, "config.strategy.mode"},
		},
		{
			name:   "provider left to the client header loads",
			config: `{"retry":{"attempts":2},"override_params":{"model":"gpt-4o-mini"}}`,
		},
		{
			name:   "known provider and virtual key load",
			config: `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"vk-ok"},{"provider":"OpenAI","api_key":"{env.TEST_GATEWAY_KEY}"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tryLoad(site{LLM: vk + "config saved `" + tt.config + "`"})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("the config did not load: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the config loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("load error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), gatewayKey) {
				t.Fatalf("load error holds a secret: %v", err)
			}
		})
	}
}

// TestLiteralCredentialWarnsAtLoad: a virtual key whose credential is
// written literally (as Caddy's {$VAR} Caddyfile syntax leaves it after
// adapting) is in the admin API's config and autosave.json. The gateway
// loads it but logs one WARN line naming the key and the field, never the
// value; a placeholder gives no warning.
func TestLiteralCredentialWarnsAtLoad(t *testing.T) {
	const secret = "sk-literal-readme-secret-4711"
	t.Setenv("TEST_README_PLACEHOLDER_KEY", "sk-placeholder-value-0815")
	loadSite(t, site{LLM: "virtual_key vk-literal {\n\t\t\tprovider openai\n\t\t\tapi_key " + secret +
		"\n\t\t}\n\t\tvirtual_key vk-placeholder {\n\t\t\tprovider openai\n\t\t\tapi_key {env.TEST_README_PLACEHOLDER_KEY}\n\t\t}"})
	log := readLog(t)
	var warns []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "literal credential") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d literal-credential lines, want 1:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	for _, w := range []string{`"level":"warn"`, `"virtual_key":"vk-literal"`, `"api_key"`, "{env.VAR}"} {
		if !strings.Contains(warns[0], w) {
			t.Errorf("warning lacks %s: %s", w, warns[0])
		}
	}
	if strings.Contains(log, secret) || strings.Contains(log, "sk-placeholder-value-0815") {
		t.Fatal("the log holds a credential")
	}
}
