// Package llmgateway registers the caddy-llm-gateway modules with Caddy:
// the `llm` app (control plane), the `llm_gateway` handler (data plane) and
// the dynamic upstream source its reverse proxies use. Import it (or build
// with xcaddy --with) to get them.
package llmgateway

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"

	// Provider families register themselves with the provider registry.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/all"
	// llm_ratelimit registers itself and the rate-limit policy API.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/ratelimit"
	// Management APIs register their control-plane routes.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/prompts/promptapi"
	// The llm_secrets log field filter masks credential headers in logs.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/logfilter"
	// The dynamic upstream source registers itself as a Caddy module.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

func init() {
	caddy.RegisterModule(app.App{})
	caddy.RegisterModule(handlers.Gateway{})
}
