package llmgateway

import (
	"encoding/json"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
)

// parseGuardrail parses the `guardrail` line of the global llm option:
//
//	guardrail <id> <file path | inline JSON object>
//
// It saves a guardrail definition under id, so configs can name it in the
// string form of input_guardrails / output_guardrails. The definition is
// checked when the config loads (llm app provisioning).
func parseGuardrail(d *caddyfile.Dispenser, a *app.App) error {
	var id, val string
	if !d.Args(&id, &val) || d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(1) {
		return d.Errf("guardrail %q: takes no block; give a file path or an inline JSON object", id)
	}
	if _, dup := a.Guardrails[id]; dup {
		return d.Errf("guardrail %q: defined twice", id)
	}
	if a.Guardrails == nil {
		a.Guardrails = map[string]json.RawMessage{}
	}
	if strings.HasPrefix(strings.TrimSpace(val), "{") {
		if !json.Valid([]byte(val)) {
			return d.Errf("guardrail %q: inline value is not valid JSON", id)
		}
		a.Guardrails[id] = json.RawMessage(val)
		return nil
	}
	a.Guardrails[id] = caddyconfig.JSON(val, nil)
	return nil
}
