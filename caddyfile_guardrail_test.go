package llmgateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
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
