// Package handlers is the gateway's data plane: the llm_gateway HTTP
// handler that authenticates a request, resolves its plan, runs the routing
// strategy and sends each attempt upstream through a Caddy-provisioned
// reverse_proxy http transport.
package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/realtime"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// DefaultMaxRequestBody is the request body limit when none is configured:
// large enough for a 25 MB audio upload with multipart overhead.
const DefaultMaxRequestBody = 32 << 20

// DefaultMaxResponseBody bounds an answer the gateway holds (for a
// timeout, the cache, validation or translation) when none is configured.
const DefaultMaxResponseBody = 64 << 20

// Gateway is the llm_gateway handler. It is terminal: it answers every
// request itself, from a provider or with an error in OpenAI's envelope.
type Gateway struct {
	// MaxRequestBody is the largest request body accepted, in bytes.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`
	// MaxResponseBody bounds every provider answer the gateway holds in
	// memory (to meet a timeout, to validate or store it, or to translate
	// it), in bytes; default DefaultMaxResponseBody. A larger answer is a
	// 502. Streams and passed-through answers are not held.
	MaxResponseBody int64 `json:"max_response_body,omitempty"`
	// CustomHostAllow lists what a client-given custom_host may reach
	// besides public addresses: "loopback", "private", "link_local",
	// "any", or CIDRs.
	CustomHostAllow []string `json:"custom_host_allow,omitempty"`
	// Transport is reverse_proxy's transport configuration (the "http"
	// transport's options: timeouts, keep-alive, HTTP versions, TLS trust),
	// applied to every provider connection.
	Transport json.RawMessage `json:"transport,omitempty"`
	// CacheSize is the response cache's capacity in bytes (default
	// cache.DefaultSize, 256 MiB). Routes with the same size share one
	// cache; answers are cached only for targets whose config has cache.
	CacheSize int64 `json:"cache_size,omitempty"`
	// TraceContent records message content (gen_ai.input.messages,
	// gen_ai.output.messages) on the attempt spans when tracing is on.
	// Off by default: prompts and answers may be confidential.
	TraceContent bool `json:"trace_content,omitempty"`
	// Realtime bounds the Realtime API's WebSocket sessions
	// (docs/realtime.md); nil takes the defaults.
	Realtime *realtime.Config `json:"realtime,omitempty"`
	// BatchMode is how the route runs a batch (completion_window 24h)
	// whose one target's provider has a batch job API of its own
	// (Anthropic's Message Batches): "native" (the default) submits it as
	// one provider job, at the provider's batch price; "managed" runs
	// each line through the pipeline as for any other provider.
	BatchMode string `json:"batch_mode,omitempty"`
	// ManagementOff stops this route answering the management API
	// (controlplane: keys, configs, prompts, policies, logs, feedback):
	// those requests get a 404 and are never forwarded to a provider. An
	// operator serves the API on a site of its choosing with llm_api.
	ManagementOff bool `json:"management_off,omitempty"`

	app *app.App
	// management is the llm app's management API router (controlplane):
	// its Owns decides which requests are the management API's.
	management *controlplane.Router
	// transports[guarded][tls]: plain and TLS, for trusted and for
	// guarded attempts. A transport is TLS or not for all its upstreams;
	// and guarded attempts (addresses from client input) get transports
	// of their own, because a connection pool is keyed by host:port only:
	// a guarded request must never reuse an idle connection a trusted
	// virtual key opened to an internal address.
	transports [2][2]http.RoundTripper
	guard      *upstream.Guard
	// hooks runs the hooks and guardrails of configs (guardrails.go).
	hooks   *guardrails.Runner
	router  *routing.Router
	configs *routing.ConfigCache
	logger  *zap.Logger
	// breakers and cache are the llm app's, shared by every route and
	// kept across reloads; release gives them back in Cleanup.
	breakers *routing.BreakerSet
	cache    *responseCache
	release  []func()
	// routeKey is the key this route's batch runner is registered under
	// and the batches it creates carry (see routeKey).
	routeKey string
	// budget is the usage-limit stage (budget.go).
	budget app.BudgetStage
	// sockets counts each key's open realtime sessions across reloads;
	// hub holds the sessions this configuration opened (realtime.go).
	sockets *realtime.Sockets
	hub     *realtime.Hub
}

// CaddyModule returns the Caddy module information.
func (Gateway) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_gateway",
		New: func() caddy.Module { return new(Gateway) },
	}
}

// Provision loads the llm app and provisions four reverse_proxy http
// transports: TLS and plain-HTTP, each for trusted and for guarded
// attempts (see Gateway.transports).
func (g *Gateway) Provision(ctx caddy.Context) error {
	g.logger = ctx.Logger()
	switch g.BatchMode {
	case "", BatchNative, BatchManaged:
	default:
		return fmt.Errorf("batch_mode: %q is neither %s nor %s", g.BatchMode, BatchNative, BatchManaged)
	}
	if g.MaxRequestBody <= 0 {
		g.MaxRequestBody = DefaultMaxRequestBody
	}
	if g.MaxResponseBody <= 0 {
		g.MaxResponseBody = DefaultMaxResponseBody
	}
	a, err := ctx.App(app.ID)
	if err != nil {
		return fmt.Errorf("loading llm app: %v", err)
	}
	g.app = a.(*app.App)
	g.management = g.app.ControlPlane()
	if g.guard, err = upstream.NewGuard(g.CustomHostAllow); err != nil {
		return err
	}
	g.provisionGuardrails()
	if err := realtime.RegisterMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	var releaseSockets func()
	g.sockets, releaseSockets = realtime.Pool()
	g.release, g.hub = append(g.release, releaseSockets), &realtime.Hub{}
	for guarded := range 2 {
		for tls := range 2 {
			if g.transports[guarded][tls], err = g.loadTransport(ctx, tls == 1); err != nil {
				return err
			}
		}
	}
	breakers, release, err := g.app.Breakers(g.logger)
	if err != nil {
		return err
	}
	g.breakers, g.release = breakers, append(g.release, release)
	if err := g.provisionCache(); err != nil {
		return err
	}
	if err := g.provisionBudget(ctx); err != nil {
		return err
	}
	loads, releaseLoads, err := g.app.Loads()
	if err != nil {
		return err
	}
	g.release = append(g.release, releaseLoads)
	g.router = routing.NewRouter()
	g.router.Breakers = g.breakers
	g.router.Loads = loads
	g.router.Prices = g.app.Prices
	pins, releasePins, err := g.app.Pins()
	if err != nil {
		return err
	}
	g.release = append(g.release, releasePins)
	g.router.Pins = pins
	g.configs = routing.NewConfigCache(1024)
	// Managed batch lines run through the pipeline (and egress policy)
	// of the route that created them; see routeKey.
	if eng := g.app.Batches(); eng != nil {
		if g.routeKey, err = routeKey(g); err != nil {
			return err
		}
		g.release = append(g.release, eng.RegisterRunner(g.routeKey, batchRunner{g}))
	}
	return nil
}

// routeKey identifies a route across reloads for its managed batches: a
// digest of the llm_gateway block's configuration (after defaults), so
// the route of a reloaded config with the same block takes over its
// batches, and a batch never runs under a route configured differently
// (another egress policy, transport, or limits). Routes with identical
// blocks share a key, being interchangeable.
func routeKey(g *Gateway) (string, error) {
	raw, err := json.Marshal(g)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return "llm_gateway:" + hex.EncodeToString(sum[:16]), nil
}

// loadTransport provisions Caddy's reverse_proxy "http" transport with the
// user's transport options; attempts call it directly (see send.go).
func (g *Gateway) loadTransport(ctx caddy.Context, tls bool) (http.RoundTripper, error) {
	transport := map[string]any{}
	if len(g.Transport) > 0 {
		if err := json.Unmarshal(g.Transport, &transport); err != nil {
			return nil, fmt.Errorf("transport: %v", err)
		}
	}
	delete(transport, "protocol")
	if _, ok := transport["proxy_protocol"]; ok {
		// It would tell every provider the client's address, which the
		// gateway keeps from them (no X-Forwarded-* either).
		return nil, fmt.Errorf("transport: proxy_protocol is not supported: providers are not told client addresses")
	}
	if tls {
		tlsCfg, _ := transport["tls"].(map[string]any)
		if tlsCfg == nil {
			tlsCfg = map[string]any{}
		}
		tlsCfg["server_name"] = "{http.vars." + upstream.VarServerName + "}"
		transport["tls"] = tlsCfg
	} else {
		delete(transport, "tls")
	}
	raw, err := json.Marshal(transport)
	if err != nil {
		return nil, err
	}
	mod, err := ctx.LoadModuleByID("http.reverse_proxy.transport.http", raw)
	if err != nil {
		return nil, fmt.Errorf("provisioning the http transport: %v", err)
	}
	ht := mod.(*reverseproxy.HTTPTransport)
	upstream.WrapTransport(ht.Transport)
	return ht, nil
}

// Cleanup releases the shared state this handler loaded.
func (g *Gateway) Cleanup() error {
	if g.hub != nil {
		// Open sessions end at once on shutdown (1001), and after the
		// close delay, if one is set, when a reload replaced this route.
		delay := g.Realtime.Limits().CloseDelay
		if caddy.Exiting() {
			delay = 0
		}
		g.hub.Shutdown(delay, !caddy.Exiting() && delay <= 0)
	}
	for _, release := range g.release {
		release()
	}
	g.release = nil
	return nil
}

// SetClock replaces the clock the shared circuit breakers and response
// caches read (see app.SetClock), for tests; it returns the restore
// function.
func SetClock(fn func() time.Time) (restore func()) { return app.SetClock(fn) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Gateway)(nil)
	_ caddyhttp.MiddlewareHandler = (*Gateway)(nil)
	_ caddy.CleanerUpper          = (*Gateway)(nil)
)
