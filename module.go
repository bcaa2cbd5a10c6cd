// Package llmgateway brings in every caddy-llm-gateway module: the `llm`
// app (control plane) and its global Caddyfile option, the `llm_gateway`
// handler (data plane) and its directive, `llm_mcp` (the MCP gateway), `llm_ratelimit`, the
// `llm_secrets` log encoder and field filter, the `llm_health` probes,
// the provider families and the management APIs. Each package registers its own modules and
// Caddyfile syntax in its init; import this one (or build with xcaddy
// --with) to get them all.
package llmgateway

import (
	// The llm app and its global option.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	// The llm_gateway handler and its directive.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"
	// The llm_api handler: the management API on a site of its own.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/apiserver"
	// Provider families register themselves with the provider registry.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/all"
	// llm_ratelimit registers itself and the rate-limit policy API.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/ratelimit"
	// The management API modules (llm.api.*).
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/keys/keysapi"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/keys/usersapi"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/prompts/promptapi"
	// The usage ledger's analytics, logs and usage APIs.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/ledger/ledgerapi"
	// The usage-limit (budget) API.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/budgets/budgetapi"
	// The llm_console web console.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/console"
	// The llm_mcp handler: the MCP gateway.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/mcp"
	// The llm_health liveness and readiness handler.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/health"
	// The llm_secrets log encoder and field filter mask credential headers
	// in logs.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/logfilter"
)
