package app

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/tidwall/gjson"
)

func adapt(t *testing.T, caddyfile string) ([]byte, error) {
	t.Helper()
	adapter := caddyconfig.GetAdapter("caddyfile")
	out, _, err := adapter.Adapt([]byte(caddyfile), nil)
	return out, err
}

func TestCaddyfileGuardrail(t *testing.T) {
	tests := []struct {
		name    string
		lines   string
		check   func(t *testing.T, cfg []byte)
		wantErr string
	}{
		{name: "inline JSON and file", lines: "guardrail pii `{\"default.regexMatch\": {\"rule\": \"\\\\d{16}\", \"not\": true}, \"deny\": true}`\n\t\tguardrail tone /etc/gw/tone.json",
			check: func(t *testing.T, cfg []byte) {
				g := gjson.GetBytes(cfg, "apps.llm.guardrails")
				if g.Get("pii.deny").Type != gjson.True || g.Get(`pii.default\.regexMatch.rule`).Str != `\d{16}` {
					t.Fatalf("pii: %s", g.Raw)
				}
				if g.Get("tone").Str != "/etc/gw/tone.json" {
					t.Fatalf("tone: %s", g.Raw)
				}
			}},
		{name: "missing value", lines: "guardrail pii", wantErr: "wrong argument count"},
		{name: "extra argument", lines: "guardrail pii a.json b.json", wantErr: "wrong argument count"},
		{name: "invalid inline JSON", lines: "guardrail pii `{\"a\": }`", wantErr: `guardrail "pii": inline value is not valid JSON`},
		{name: "duplicate id", lines: "guardrail pii a.json\n\t\tguardrail pii b.json", wantErr: `guardrail "pii": defined twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := adapt(t, "{\n\tadmin off\n\tllm {\n\t\t"+tc.lines+"\n\t}\n}\n:0 {\n\trespond ok\n}\n")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

// TestGuardrailLoadFailure loads real configs: a saved guardrail RE2
// cannot compile, one missing a check's required parameter, and one
// naming more checks than a stage may run fail the load, naming the
// guardrail, the field and the rule.
func TestGuardrailLoadFailure(t *testing.T) {
	many := strings.Repeat(`{"id": "default.notNull"}, `, 32) + `{"id": "default.notNull"}`
	cases := []struct {
		name, def string
		want      []string
	}{
		{"RE2", `{"default.regexMatch": {"rule": "(?<=x)y"}}`, []string{`guardrail "bad"`, `["default.regexMatch"]`, "RE2"}},
		{"missing parameter", `{"default.wordCount": {"minWords": 1}, "deny": true}`, []string{`guardrail "bad"`, `["default.wordCount"]`, `missing required parameter "maxWords"`}},
		{"too many checks", `{"checks": [` + many + `]}`, []string{`guardrail "bad"`, "33 checks", "at most 32"}},
	}
	// caddy.Load writes the instance id into Caddy's data directory: a
	// temporary one, never the user's.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := adapt(t, "{\n\tadmin off\n\tstorage file_system "+t.TempDir()+"\n\tllm {\n\t\tguardrail bad `"+tc.def+"`\n\t}\n}\n")
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(cfg) {
				t.Fatalf("adapted config %s", cfg)
			}
			err = caddy.Load(cfg, true)
			if err == nil {
				_ = caddy.Stop()
				t.Fatal("the config loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCaddyfileResponsesRetention(t *testing.T) {
	cases := []struct {
		name, option, want, err string
	}{
		{"hours", "responses_retention 48h", `"responses_retention":172800000000000`, ""},
		{"days", "responses_retention 7d", `"responses_retention":604800000000000`, ""},
		{"negative", "responses_retention -1h", "", "positive duration"},
		{"junk", "responses_retention soon", "", "positive duration"},
		{"missing", "responses_retention", "", "wrong argument count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf := "{\n\tllm {\n\t\t" + c.option + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
			out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("%v: %s", err, out)
			}
		})
	}
}

func TestCaddyfileSemanticCache(t *testing.T) {
	tests := []struct {
		name    string
		block   string
		want    map[string]string // gjson path under apps.llm.semantic_cache → raw value
		wantErr string
	}{
		{name: "full", block: "embedding vk-embed text-embedding-3-small\n threshold 0.97\n max_memory 64MiB\n max_entries 500\n embed_timeout 2s",
			want: map[string]string{"embedding.virtual_key": `"vk-embed"`, "embedding.model": `"text-embedding-3-small"`,
				"threshold": "0.97", "max_memory": "67108864", "max_entries": "500", "embed_timeout": "2000000000"}},
		{name: "defaults", block: "embedding vk m", want: map[string]string{"embedding.model": `"m"`, "threshold": "", "max_memory": ""}},
		{name: "no embedding", block: "threshold 0.9", wantErr: "embedding <virtual_key> <model> is required"},
		{name: "embedding without model", block: "embedding vk", wantErr: "wrong argument count"},
		{name: "threshold zero", block: "embedding vk m\n threshold 0", wantErr: "threshold must be a number in (0, 1]"},
		{name: "threshold above one", block: "embedding vk m\n threshold 1.5", wantErr: "threshold must be a number in (0, 1]"},
		{name: "bad size", block: "embedding vk m\n max_memory lots", wantErr: "max_memory: invalid size"},
		{name: "bad entries", block: "embedding vk m\n max_entries -3", wantErr: "max_entries must be a positive integer"},
		{name: "bad timeout", block: "embedding vk m\n embed_timeout soon", wantErr: "embed_timeout: invalid duration"},
		{name: "unknown option", block: "embedding vk m\n similarity 0.9", wantErr: `unknown semantic_cache option "similarity"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := adapt(t, "{\n\tadmin off\n\tllm {\n\t\tsemantic_cache {\n"+tc.block+"\n\t\t}\n\t}\n}\n:0 {\n\trespond ok\n}\n")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc := gjson.GetBytes(cfg, "apps.llm.semantic_cache")
			for path, raw := range tc.want {
				if got := sc.Get(path).Raw; got != raw {
					t.Errorf("%s = %s, want %s (in %s)", path, got, raw, sc.Raw)
				}
			}
		})
	}
	if _, err := adapt(t, "{\n\tllm {\n\t\tsemantic_cache {\n embedding a b\n}\n\t\tsemantic_cache {\n embedding a b\n}\n\t}\n}\n:0 {\n\trespond ok\n}\n"); err == nil || !strings.Contains(err.Error(), "configured twice") {
		t.Fatalf("a second semantic_cache: %v", err)
	}
}

// TestUnmarshalCaddyfile parses llm blocks straight into an App, without
// the adapter: every option's value lands in its field, and each mistake
// is refused with a message naming it.
func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		block   string
		check   func(t *testing.T, a *App)
		wantErr string
	}{
		{name: "api keys", block: "api_key a k1\napi_key b k2 {\n workspace_id w\n organization_id o\n}", check: func(t *testing.T, a *App) {
			want := []APIKey{{Name: "a", Key: "k1"}, {Name: "b", Key: "k2", WorkspaceID: "w", OrganisationID: "o"}}
			if !reflect.DeepEqual(a.APIKeys, want) {
				t.Fatalf("api keys %+v", a.APIKeys)
			}
		}},
		{name: "api key scopes", block: "api_key admin k {\n type organisation\n scopes api_keys.create configs.read\n scopes *\n}", check: func(t *testing.T, a *App) {
			want := []APIKey{{Name: "admin", Key: "k", Type: "organisation", Scopes: []string{"api_keys.create", "configs.read", "*"}}}
			if !reflect.DeepEqual(a.APIKeys, want) {
				t.Fatalf("api keys %+v", a.APIKeys)
			}
		}},
		{name: "api key type unknown", block: "api_key a k {\n type team\n}", wantErr: `type must be workspace or organisation`},
		{name: "keys block", block: "keys {\n secret {env.S}\n encryption_key {file./k}\n previous_encryption_key {env.OLD}\n}", check: func(t *testing.T, a *App) {
			want := &KeysConfig{Secret: "{env.S}", EncryptionKey: "{file./k}", PreviousEncryptionKeys: []string{"{env.OLD}"}}
			if !reflect.DeepEqual(a.Keys, want) {
				t.Fatalf("keys %+v", a.Keys)
			}
		}},
		{name: "keys option unknown", block: "keys {\n salt x\n}", wantErr: `unknown keys option "salt"`},
		{name: "api key option unknown", block: "api_key a k {\n team t\n}", wantErr: `unknown api_key option "team"`},
		{name: "virtual key", block: "virtual_key az {\n provider azure-openai\n resource_name contoso\n deployment d1 gpt-4o 2024-10-21 default\n deployment d2 gpt-4o-mini 2024-08-01\n}", check: func(t *testing.T, a *App) {
			s := a.VirtualKeys["az"]
			if s == nil || s.Provider != "azure-openai" || len(s.Deployments) != 2 || !s.Deployments[0].IsDefault || s.Deployments[1].IsDefault || s.Deployments[1].Alias != "gpt-4o-mini" {
				t.Fatalf("virtual key %+v", s)
			}
		}},
		{name: "virtual key unknown setting", block: "virtual_key v {\n provider openai\n api_kee x\n}", wantErr: "virtual key: json: unknown field"},
		{name: "deployment not default", block: "virtual_key v {\n deployment d m 1 primary\n}", wantErr: "expected 'default'"},
		{name: "service account not JSON", block: "virtual_key v {\n cloudc_service_account_json /sa.json\n}", wantErr: "must be an inline JSON object"},
		{name: "configs", block: "config f a/b.json\nconfig i `{\"virtual_key\": \"v\"}`\nconfig e `{ }`\nconfig p {env.DIR}/c.json", check: func(t *testing.T, a *App) {
			got := map[string]string{}
			for id, raw := range a.Configs {
				got[id] = string(raw)
			}
			want := map[string]string{"f": `"a/b.json"`, "i": `{"virtual_key": "v"}`, "e": `{ }`, "p": `"{env.DIR}/c.json"`}
			for id, w := range want {
				if got[id] != w {
					t.Errorf("config %s = %s, want %s", id, got[id], w)
				}
			}
		}},
		{name: "config invalid inline", block: "config c `{\"a\": }`", wantErr: `config "c": inline value is not valid JSON`},
		{name: "guardrail placeholder path", block: "guardrail g {env.DIR}/g.json", check: func(t *testing.T, a *App) {
			if string(a.Guardrails["g"]) != `"{env.DIR}/g.json"` {
				t.Fatalf("guardrail %s", a.Guardrails["g"])
			}
		}},
		{name: "guardrail block", block: "guardrail g a.json {\n deny\n}", wantErr: "takes no block"},
		{name: "scalars", block: "prompts p\nprice_catalog c.json\nmax_held_bytes 1MiB\nresponses_retention 1h", check: func(t *testing.T, a *App) {
			if a.Prompts == nil || a.Prompts.Dir != "p" || a.PriceCatalog != "c.json" || a.MaxHeldBytes != 1<<20 || a.ResponsesRetention != caddy.Duration(3600e9) {
				t.Fatalf("%+v %q %d %d", a.Prompts, a.PriceCatalog, a.MaxHeldBytes, a.ResponsesRetention)
			}
		}},
		{name: "held bytes zero", block: "max_held_bytes 0", wantErr: "max_held_bytes: invalid size"},
		{name: "prompts twice", block: "prompts a b", wantErr: "wrong argument count"},
		{name: "batches", block: "batches {\n max_file_size 1MiB\n max_active 3\n max_running 2\n}", check: func(t *testing.T, a *App) {
			if b := a.BatchLimits; b == nil || b.MaxFileBytes != 1<<20 || b.MaxActive != 3 || b.MaxRunning != 2 {
				t.Fatalf("batches %+v", b)
			}
		}},
		{name: "batches bad count", block: "batches {\n max_running 0\n}", wantErr: "batches max_running must be a positive integer"},
		{name: "batches bad size", block: "batches {\n max_file_size big\n}", wantErr: "max_file_size must be a positive size"},
		{name: "batches unknown", block: "batches {\n max_lines 3\n}", wantErr: `unknown batches option "max_lines"`},
		{name: "redis", block: "redis r:6379 {\n username u\n password p\n db 2\n key_prefix fleet-a:\n fail_open\n}", check: func(t *testing.T, a *App) {
			if r := a.Redis; r == nil || !reflect.DeepEqual(*r, RedisConfig{Address: "r:6379", Username: "u", Password: "p", DB: 2, KeyPrefix: "fleet-a:", FailOpen: true}) {
				t.Fatalf("redis %+v", r)
			}
		}},
		{name: "redis fail closed", block: "redis r:6379 {\n fail_open\n fail_closed\n}", check: func(t *testing.T, a *App) {
			if a.Redis.FailOpen {
				t.Fatal("fail_closed after fail_open left it open")
			}
		}},
		{name: "redis tls", block: "redis r:6380 {\n tls {\n ca /c.pem\n cert /a.pem\n key /k.pem\n server_name redis.internal\n }\n}", check: func(t *testing.T, a *App) {
			if tl := a.Redis.TLS; tl == nil || *tl != (RedisTLS{CA: "/c.pem", Cert: "/a.pem", Key: "/k.pem", ServerName: "redis.internal"}) {
				t.Fatalf("tls %+v", tl)
			}
		}},
		{name: "redis bare tls", block: "redis r:6380 {\n tls\n}", check: func(t *testing.T, a *App) {
			if a.Redis.TLS == nil || *a.Redis.TLS != (RedisTLS{}) {
				t.Fatalf("tls %+v", a.Redis.TLS)
			}
		}},
		{name: "redis cluster", block: "redis {\n cluster n1:6379 n2:6379\n}", check: func(t *testing.T, a *App) {
			if !reflect.DeepEqual(a.Redis.Cluster, []string{"n1:6379", "n2:6379"}) || a.Redis.Address != "" {
				t.Fatalf("cluster %+v", a.Redis)
			}
		}},
		{name: "redis sentinel", block: "redis {\n sentinel mymaster s1:26379 s2:26379\n sentinel_password {env.SP}\n}", check: func(t *testing.T, a *App) {
			if r := a.Redis; r.MasterName != "mymaster" || !reflect.DeepEqual(r.Sentinels, []string{"s1:26379", "s2:26379"}) || r.SentinelPassword != "{env.SP}" {
				t.Fatalf("sentinel %+v", r)
			}
		}},
		{name: "redis no target", block: "redis {\n db 1\n}", wantErr: "an address, cluster nodes or a sentinel master is required"},
		{name: "redis two targets", block: "redis r:6379 {\n cluster n1:6379\n}", wantErr: "give one of an address"},
		{name: "redis cluster db", block: "redis {\n cluster n1:6379\n db 2\n}", wantErr: "db must be 0 with a Redis Cluster"},
		{name: "redis sentinel without address", block: "redis {\n sentinel mymaster\n}", wantErr: "want <master name> <sentinel address>"},
		{name: "redis tls cert without key", block: "redis r:6379 {\n tls {\n cert /a.pem\n }\n}", wantErr: "cert and key go together"},
		{name: "redis tls unknown", block: "redis r:6379 {\n tls {\n verify off\n }\n}", wantErr: `unknown redis tls option "verify"`},
		{name: "redis bad db", block: "redis r:6379 {\n db -1\n}", wantErr: "redis db must be a non-negative integer"},
		{name: "redis unknown", block: "redis r:6379 {\n cluster_mode\n}", wantErr: `unknown redis option "cluster_mode"`},
		{name: "unknown option", block: "budget 5", wantErr: `unknown llm option "budget"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := new(App)
			err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm {\n" + tc.block + "\n}"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, a)
		})
	}
	if err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm arg {\n}")); err == nil {
		t.Fatal("an argument after llm was accepted")
	}
}

// TestGlobalOptionAddsUp: a second llm block adds to the first, and a
// guardrail id is unique across both.
func TestGlobalOptionAddsUp(t *testing.T) {
	first, err := parseGlobalOption(caddyfile.NewTestDispenser("llm {\n api_key a k\n guardrail g a.json\n}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := parseGlobalOption(caddyfile.NewTestDispenser("llm {\n api_key b k\n}"), first)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(second.(httpcaddyfile.App).Value, "api_keys.#.name").Raw; got != `["a","b"]` {
		t.Fatalf("api keys %s", got)
	}
	if _, err := parseGlobalOption(caddyfile.NewTestDispenser("llm {\n guardrail g b.json\n}"), first); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Fatalf("a guardrail redefined in a second block: %v", err)
	}
}
