package routing

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestSchemaCompiles(t *testing.T) {
	if _, err := loadConfigSchema(); err != nil {
		t.Fatalf("embedded schema does not compile: %v", err)
	}
	// The spec lists 18 groups of required keys.
	if got := len(strings.Split(schemaGroups, ", ")); got != 18 {
		t.Fatalf("schema has %d required-key groups, want 18: %s", got, schemaGroups)
	}
}

func TestSchemaAcceptsRequiredKeyGroups(t *testing.T) {
	cases := map[string]string{
		"provider+api_key":     `{"provider":"openai","api_key":"sk-1"}`,
		"provider+custom_host": `{"provider":"openai","custom_host":"http://localhost:8000/v1"}`,
		"virtual_key":          `{"virtual_key":"vk-1"}`,
		"strategy+targets":     `{"strategy":{"mode":"single"},"targets":[{"virtual_key":"vk"}]}`,
		"cache":                `{"cache":{"mode":"simple"}}`,
		"retry":                `{"retry":{"attempts":3}}`,
		"prompt_id":            `{"prompt_id":"pp-1"}`,
		"forward_headers":      `{"forward_headers":["x-custom"]}`,
		"request_timeout":      `{"request_timeout":10000}`,
		"provider+clouda":      `{"provider":"clouda","clouda_access_key_id":"a","clouda_secret_access_key":"s"}`,
		"provider+cloudc sa":   `{"provider":"cloudc","cloudc_region":"us-central1","cloudc_service_account_json":{"type":"service_account"}}`,
		"provider+cloudc proj": `{"provider":"cloudc","cloudc_region":"us-central1","cloudc_project_id":"p"}`,
		"provider+cloudb deployment": `{"provider":"cloudb","cloudb_deployment_name":"d","cloudb_deployment_type":"serverless",` +
			`"cloudb_region":"eastus","cloudb_api_version":"2024-05-01"}`,
		"provider+cloudb endpoint": `{"provider":"cloudb","cloudb_endpoint_name":"e","cloudb_deployment_type":"managed"}`,
		"after_request_hooks":      `{"after_request_hooks":[{"id":"h1","async":true,"checks":[{"id":"default.contains","parameters":{"words":["x"]}}]}]}`,
		"before_request_hooks":     `{"before_request_hooks":[{"id":"h1","type":"guardrail","on_fail":{"deny":true,"feedback":{"value":-1,"weight":1,"metadata":{}}}}]}`,
		"input_guardrails":         `{"input_guardrails":["pg-1"]}`,
		"output_guardrails":        `{"output_guardrails":[{"id":"g","deny":true,"on_fail":{"deny":true,"feedback":{"value":1}},"default.contains":{"words":["a"]}}]}`,

		// Other configurations that must pass.
		"loadbalance with weights": `{"strategy":{"mode":"loadbalance"},"targets":[` +
			`{"provider":"openai","api_key":"k1","weight":0.7,"override_params":{"model":"gpt-4o"}},` +
			`{"virtual_key":"vk-2","weight":0.3}]}`,
		"retry singular spelling": `{"provider":"openai","api_key":"k","retry":{"attempts":2,"use_retry_after_header":true,"on_status_codes":[429,503]}}`,
		"retry plural spelling":   `{"provider":"openai","api_key":"k","retry":{"attempts":0,"use_retry_after_headers":false}}`,
		"guardrail string item":   `{"provider":"openai","api_key":"k","input_guardrails":["pg-abc",{"id":"g2","async":false,"default.regexMatch":{"rule":"x"}}]}`,
		"conditional strategy": `{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.tier":{"$eq":"pro"}},"then":"a"}],"default":"b"},` +
			`"targets":[{"name":"a","virtual_key":"v1"},{"name":"b","virtual_key":"v2"}]}`,
		"nested fallback with cb and cache": `{"strategy":{"mode":"fallback","on_status_codes":[429]},"cache":{"mode":"semantic","max_age":60},` +
			`"targets":[{"strategy":{"mode":"loadbalance"},"targets":[{"provider":"openai","api_key":"k"}]},` +
			`{"provider":"anthropic","api_key":"k","cb_config":{"failure_threshold":3,"cooldown_interval":30000,"failure_status_codes":[500]}}]}`,
		"cloudb deployments": `{"provider":"azure-openai","api_key":"k","resource_name":"r","deployments":[` +
			`{"deployment_id":"d1","alias":"gpt-4o","api_version":"2024-06-01","is_default":true}]}`,
		"everything scalar": `{"name":"n","strict_open_ai_compliance":false,"provider":"openai","api_key":"k","vendor_organization":"o",` +
			`"vendor_project":"p","on_status_codes":[500],"clouda_region":"us-east-1","clouda_session_token":"t"}`,
		"whitespace around": "  \n{\"virtual_key\":\"vk\"}\n ",
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if err := ValidateConfig([]byte(cfg)); err != nil {
				t.Fatalf("ValidateConfig(%s) = %v, want nil", cfg, err)
			}
		})
	}
}

func TestSchemaRejects(t *testing.T) {
	cases := []struct {
		name, cfg string
		// wantParam is the exact Param; wantMsg are substrings of Message.
		wantParam string
		wantMsg   []string
	}{
		{
			name:      "unknown top-level key",
			cfg:       `{"provider":"openai","api_key":"k","foo":1}`,
			wantParam: "config.foo",
			wantMsg:   []string{`config.foo: unknown key "foo"`},
		},
		{
			name:      "typo'd key beats group miss",
			cfg:       `{"provider":"openai","apikey":"k"}`,
			wantParam: "config.apikey",
			wantMsg:   []string{`unknown key "apikey"`},
		},
		{
			name:      "unknown key in strategy",
			cfg:       `{"strategy":{"mode":"fallback","modes":"x"},"targets":[{"virtual_key":"v"}]}`,
			wantParam: "config.strategy.modes",
			wantMsg:   []string{`config.strategy.modes: unknown key "modes"`},
		},
		{
			name:      "unknown key in cache",
			cfg:       `{"cache":{"mode":"simple","ttl":5}}`,
			wantParam: "config.cache.ttl",
			wantMsg:   []string{"config.cache.ttl", `unknown key "ttl"`},
		},
		{
			name:      "unknown key in retry",
			cfg:       `{"retry":{"attempts":1,"backoff":2}}`,
			wantParam: "config.retry.backoff",
			wantMsg:   []string{"config.retry.backoff", `unknown key "backoff"`},
		},
		{
			name:      "unknown key in cb_config",
			cfg:       `{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":1,"cooldown_interval":30000,"half_open":true}}`,
			wantParam: "config.cb_config.half_open",
			wantMsg:   []string{"config.cb_config.half_open", `unknown key "half_open"`},
		},
		{
			name:      "several unknown keys",
			cfg:       `{"virtual_key":"v","zz":1,"aa":2}`,
			wantParam: "config.aa",
			wantMsg:   []string{`config.aa: unknown key "aa"`, `also unknown: "zz"`},
		},
		{
			name:      "strategy mode enum",
			cfg:       `{"strategy":{"mode":"random"},"targets":[{"virtual_key":"v"}]}`,
			wantParam: "config.strategy.mode",
			wantMsg:   []string{"config.strategy.mode", `must be one of "single", "loadbalance", "fallback", "conditional" but found "random"`},
		},
		{
			name:      "cache mode enum",
			cfg:       `{"cache":{"mode":"fuzzy"}}`,
			wantParam: "config.cache.mode",
			wantMsg:   []string{"config.cache.mode", `"fuzzy"`, `"simple", "semantic"`},
		},
		{
			name:      "cloudb deployment type enum",
			cfg:       `{"provider":"cloudb","cloudb_endpoint_name":"e","cloudb_deployment_type":"x"}`,
			wantParam: "config.cloudb_deployment_type",
			wantMsg:   []string{"config.cloudb_deployment_type", `"serverless", "managed"`},
		},
		{
			name:      "cooldown below minimum",
			cfg:       `{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":1,"cooldown_interval":29999}}`,
			wantParam: "config.cb_config.cooldown_interval",
			wantMsg:   []string{"config.cb_config.cooldown_interval: must be >= 30000 but found 29999"},
		},
		{
			name:      "failure threshold below minimum",
			cfg:       `{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":0,"cooldown_interval":60000}}`,
			wantParam: "config.cb_config.failure_threshold",
			wantMsg:   []string{"config.cb_config.failure_threshold: must be >= 1 but found 0"},
		},
		{
			name:      "cb_config missing cooldown",
			cfg:       `{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":2}}`,
			wantParam: "config.cb_config.cooldown_interval",
			wantMsg:   []string{`config.cb_config: missing required key "cooldown_interval"`},
		},
		{
			name:      "conditional without conditions",
			cfg:       `{"strategy":{"mode":"conditional","default":"a"},"targets":[{"name":"a","virtual_key":"v"}]}`,
			wantParam: "config.strategy.conditions",
			wantMsg:   []string{`config.strategy: missing required key "conditions"`, `mode is "conditional"`},
		},
		{
			name: "conditional without default",
			cfg: `{"strategy":{"mode":"conditional","conditions":[{"query":{},"then":"a"}]},` +
				`"targets":[{"name":"a","virtual_key":"v"}]}`,
			wantParam: "config.strategy.default",
			wantMsg:   []string{`config.strategy: missing required key "default"`},
		},
		{
			name: "condition item without then",
			cfg: `{"strategy":{"mode":"conditional","conditions":[{"query":{"a":1},"then":"a"},{"query":{"b":1}}],"default":"a"},` +
				`"targets":[{"name":"a","virtual_key":"v"}]}`,
			wantParam: "config.strategy.conditions[1].then",
			wantMsg:   []string{`config.strategy.conditions[1]: missing required key "then"`},
		},
		{
			name:      "strategy without mode",
			cfg:       `{"strategy":{},"targets":[{"virtual_key":"v"}]}`,
			wantParam: "config.strategy.mode",
			wantMsg:   []string{`config.strategy: missing required key "mode"`},
		},
		{
			name:      "cache without mode",
			cfg:       `{"cache":{"max_age":10}}`,
			wantParam: "config.cache.mode",
			wantMsg:   []string{`config.cache: missing required key "mode"`},
		},
		{
			name:      "retry without attempts",
			cfg:       `{"retry":{"on_status_codes":[429]}}`,
			wantParam: "config.retry.attempts",
			wantMsg:   []string{`config.retry: missing required key "attempts"`},
		},
		{
			name:      "retry attempts wrong type",
			cfg:       `{"retry":{"attempts":"3"}}`,
			wantParam: "config.retry.attempts",
			wantMsg:   []string{`config.retry.attempts: must be an integer but found string "3"`},
		},
		{
			name:      "retry attempts fractional",
			cfg:       `{"retry":{"attempts":1.5}}`,
			wantParam: "config.retry.attempts",
			wantMsg:   []string{`config.retry.attempts: must be an integer but found number 1.5`},
		},
		{
			name: "nested invalid target",
			cfg: `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"k"},` +
				`{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":1,"cooldown_interval":29999}}]}`,
			wantParam: "config.targets[1].cb_config.cooldown_interval",
			wantMsg:   []string{"config.targets[1].cb_config.cooldown_interval: must be >= 30000 but found 29999"},
		},
		{
			name:      "nested target with unknown key",
			cfg:       `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"k","modle":"gpt-4o"}]}`,
			wantParam: "config.targets[0].modle",
			wantMsg:   []string{`config.targets[0].modle: unknown key "modle"`},
		},
		{
			name:      "nested target satisfying no group",
			cfg:       `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"v"},{"provider":"openai","weight":1}]}`,
			wantParam: "config.targets[1]",
			wantMsg:   []string{"config.targets[1]: must contain at least one of the required key groups (provider+api_key, provider+custom_host, virtual_key, strategy+targets,"},
		},
		{
			name: "doubly nested target",
			cfg: `{"strategy":{"mode":"fallback"},"targets":[{"strategy":{"mode":"loadbalance"},"targets":[` +
				`{"provider":"openai","api_key":"k","weight":-1}]}]}`,
			wantParam: "config.targets[0].targets[0].weight",
			wantMsg:   []string{"config.targets[0].targets[0].weight: must be >= 0 but found -1"},
		},
		{
			name:      "empty object",
			cfg:       `{}`,
			wantParam: "config",
			wantMsg:   []string{"config: must contain at least one of the required key groups", "output_guardrails)"},
		},
		{
			name:      "deployments item missing alias",
			cfg:       `{"provider":"azure-openai","api_key":"k","deployments":[{"deployment_id":"d","api_version":"v"}]}`,
			wantParam: "config.deployments[0].alias",
			wantMsg:   []string{`config.deployments[0]: missing required key "alias"`},
		},
		{
			name:      "before hook missing id",
			cfg:       `{"before_request_hooks":[{"type":"guardrail","checks":[]}]}`,
			wantParam: "config.before_request_hooks[0].id",
			wantMsg:   []string{`config.before_request_hooks[0]: missing required key "id"`},
		},
		{
			name:      "after hook check missing parameters",
			cfg:       `{"after_request_hooks":[{"id":"h","checks":[{"id":"c"}]}]}`,
			wantParam: "config.after_request_hooks[0].checks[0].parameters",
			wantMsg:   []string{`config.after_request_hooks[0].checks[0]: missing required key "parameters"`},
		},
		{
			name:      "nested too deep",
			cfg:       `{"metadata":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
			wantParam: "config",
			wantMsg:   []string{"128 levels"},
		},
		{
			name:      "after hook deny must be a boolean",
			cfg:       `{"after_request_hooks":[{"id":"h","on_fail":{"deny":"yes"}}]}`,
			wantParam: "config.after_request_hooks[0].on_fail.deny",
			wantMsg:   []string{`boolean`},
		},
		{
			name:      "input guardrail on_success rejects deny",
			cfg:       `{"input_guardrails":[{"id":"g","on_success":{"deny":false}}]}`,
			wantParam: "config.input_guardrails[0].on_success.deny",
			wantMsg:   []string{`unknown key "deny"`},
		},
		{
			name:      "guardrail extra key not an object",
			cfg:       `{"input_guardrails":[{"id":"g","default.contains":"words"}]}`,
			wantParam: `config.input_guardrails[0]["default.contains"]`,
			wantMsg:   []string{`config.input_guardrails[0]["default.contains"]: must be an object but found string "words"`},
		},
		{
			name:      "guardrail item neither string nor object",
			cfg:       `{"output_guardrails":[42]}`,
			wantParam: "config.output_guardrails[0]",
			wantMsg:   []string{"config.output_guardrails[0]: must be a string or an object but found number 42"},
		},
		{
			name:      "feedback unknown key",
			cfg:       `{"before_request_hooks":[{"id":"h","on_fail":{"feedback":{"score":1}}}]}`,
			wantParam: "config.before_request_hooks[0].on_fail.feedback.score",
			wantMsg:   []string{`unknown key "score"`},
		},
		{
			name:      "forward_headers wrong item type",
			cfg:       `{"forward_headers":["a",1]}`,
			wantParam: "config.forward_headers[1]",
			wantMsg:   []string{"config.forward_headers[1]: must be a string but found number 1"},
		},
		{
			name:      "request_timeout zero",
			cfg:       `{"request_timeout":0}`,
			wantParam: "config.request_timeout",
			wantMsg:   []string{"config.request_timeout: must be >= 1 but found 0"},
		},
		{
			name:      "targets not an array",
			cfg:       `{"strategy":{"mode":"fallback"},"targets":{"virtual_key":"v"}}`,
			wantParam: "config.targets",
			wantMsg:   []string{"config.targets: must be an array but found object"},
		},
		{
			name:      "non-object JSON",
			cfg:       `["virtual_key"]`,
			wantParam: "config",
			wantMsg:   []string{"config must be a JSON object", "array"},
		},
		{
			name:      "JSON string",
			cfg:       `"pc-abc"`,
			wantParam: "config",
			wantMsg:   []string{"config must be a JSON object"},
		},
		{
			name:      "malformed JSON",
			cfg:       `{"virtual_key":`,
			wantParam: "config",
			wantMsg:   []string{"config must be a JSON object"},
		},
		{
			name:      "trailing data",
			cfg:       `{"virtual_key":"v"} {}`,
			wantParam: "config",
			wantMsg:   []string{"config must be a JSON object"},
		},
		{
			name:      "empty input",
			cfg:       ``,
			wantParam: "config",
			wantMsg:   []string{"config must be a JSON object"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateConfig([]byte(tc.cfg))
			if err == nil {
				t.Fatalf("ValidateConfig(%s) = nil, want error", tc.cfg)
			}
			var ae *apierror.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not *apierror.Error: %v", err, err)
			}
			if ae.Status != http.StatusBadRequest || ae.Type != apierror.TypeInvalidRequest {
				t.Fatalf("status/type = %d/%s, want 400/%s", ae.Status, ae.Type, apierror.TypeInvalidRequest)
			}
			if ae.Param != tc.wantParam {
				t.Errorf("param = %v, want %q (message %q)", ae.Param, tc.wantParam, ae.Message)
			}
			if !strings.HasPrefix(ae.Message, "invalid config: ") {
				t.Errorf("message %q lacks the %q prefix", ae.Message, "invalid config: ")
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(ae.Message, want) {
					t.Errorf("message %q does not contain %q", ae.Message, want)
				}
			}
		})
	}
}

// TestSchemaDeterministic repeats a config with several failures at the
// same depth: the validator visits keys in map order, the chosen error must
// not depend on it.
func TestSchemaDeterministic(t *testing.T) {
	cfg := []byte(`{"strategy":{"mode":"nope"},"targets":[{"provider":"openai","api_key":"k","weight":"x"}],` +
		`"cache":{"mode":"bad"},"retry":{"attempts":-1},"bogus":1}`)
	first := ValidateConfig(cfg).Error()
	for range 50 {
		if got := ValidateConfig(cfg).Error(); got != first {
			t.Fatalf("error changed between runs: %q vs %q", first, got)
		}
	}
	if !strings.Contains(first, "config.targets[0].weight") {
		t.Fatalf("want the deepest failure, got %q", first)
	}
}

func TestSchemaConcurrent(t *testing.T) {
	good := []byte(`{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"a"},{"virtual_key":"b"}]}`)
	bad := []byte(`{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"a","cb_config":{"failure_threshold":0,"cooldown_interval":30000}}]}`)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if i%2 == 0 {
					if err := ValidateConfig(good); err != nil {
						t.Errorf("good config rejected: %v", err)
						return
					}
				} else if err := ValidateConfig(bad); err == nil || !strings.Contains(err.Error(), "config.targets[0].cb_config.failure_threshold") {
					t.Errorf("bad config: got %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

var schemaBenchConfig = []byte(`{
  "strategy": {"mode": "fallback", "on_status_codes": [429, 500, 502, 503]},
  "retry": {"attempts": 3, "on_status_codes": [429, 503], "use_retry_after_headers": true},
  "cache": {"mode": "simple", "max_age": 3600},
  "request_timeout": 30000,
  "targets": [
    {"provider": "openai", "api_key": "sk-live-0123456789abcdef",
     "override_params": {"model": "gpt-4o", "temperature": 0.2},
     "cb_config": {"failure_threshold": 5, "cooldown_interval": 60000, "failure_status_codes": [500, 502]}},
    {"provider": "anthropic", "api_key": "sk-ant-0123456789abcdef",
     "override_params": {"model": "claude-3-5-sonnet-latest", "max_tokens": 1024}}
  ]
}`)

func BenchmarkValidateConfig(b *testing.B) {
	if err := ValidateConfig(schemaBenchConfig); err != nil {
		b.Fatalf("bench config rejected: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateConfig(schemaBenchConfig); err != nil {
			b.Fatal(err)
		}
	}
}
