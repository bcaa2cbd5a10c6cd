package llmgateway

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

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
