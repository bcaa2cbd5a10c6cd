// Package health is the llm_health Caddy handler: liveness and readiness
// endpoints for load balancers, Docker's HEALTHCHECK and Kubernetes
// probes.
//
// `llm_health live` answers 200 {"status":"ok"} whenever the process
// serves HTTP, draining included (a liveness failure restarts the
// process, which a drain must not cause).
//
// `llm_health ready` means "this instance can serve". It answers 200
// {"status":"ok"} when the config is loaded (the handler only runs in a
// loaded config) and every shared store the llm app uses answers a ping
// within the timeout: Redis (`llm { redis … }`) and the usage ledger's
// database (`llm { ledger … }`). A shared store that does not answer does
// not fail readiness by default: every replica shares it, so failing
// readiness on it would take every replica out of the load balancer at
// once and turn a degraded dependency into a full outage (the gateway
// keeps serving: fail_open admits without Redis, the ledger spools). The
// probe then answers 200 {"status":"degraded","degraded":["redis"]} and
// the llm_gateway_store_up gauge reads 0 for that store. An operator who
// prefers the instance out of rotation while a store is away names it in
// fail_on; its failure answers 503
// {"status":"not_ready","failing":["redis"]}. Bodies name the stores,
// never their errors or addresses. From the moment Caddy begins to exit
// (SIGTERM, `caddy stop`, POST /stop) readiness answers 503 with
// "draining", so load balancers take the instance out while Caddy's
// shutdown_delay and grace_period let in-flight streams finish.
//
// Probes are cheap: store pings run at most once per cache period (1 s by
// default) however many probes arrive, the answers are prebuilt bytes,
// and probe requests are left out of the access log unless access_log is
// set. A change of the answer is logged (WARN when a store stops
// answering, INFO when all answer again) with the stores' errors, once
// per change.
package health

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
)

// Defaults and bounds of the handler's options.
const (
	DefaultTimeout = time.Second
	DefaultCache   = time.Second
	MaxTimeout     = 30 * time.Second
	MaxCache       = time.Minute
)

// The checks a handler answers.
const (
	CheckLive  = "live"
	CheckReady = "ready"
)

// Store names readiness gives in its 503 body.
const (
	StoreRedis  = "redis"
	StoreLedger = "ledger"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_health", parseCaddyfile)
	// Before basic_auth: probes from a kubelet or a load balancer carry
	// no credentials, and the answers hold nothing secret.
	httpcaddyfile.RegisterDirectiveOrder("llm_health", httpcaddyfile.Before, "basic_auth")
}

// Handler is the llm_health HTTP handler (module
// http.handlers.llm_health). It always answers; it never calls the next
// handler.
type Handler struct {
	// Check is "live" or "ready".
	Check string `json:"check"`
	// Timeout bounds each store's ping (default 1s, at most 30s).
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Cache is how long a round of pings answers probes (default 1s, at
	// most 1m; the Caddyfile's "cache 0" pings on every probe).
	Cache *caddy.Duration `json:"cache,omitempty"`
	// AccessLog keeps probe requests in the access log; by default they
	// are skipped, as Caddy's log_skip would.
	AccessLog bool `json:"access_log,omitempty"`
	// FailOn names the shared stores ("redis", "ledger") whose failure
	// makes the instance not ready (503). By default none does: the
	// probe reports a store that does not answer as degraded and stays
	// 200, because every replica shares it.
	FailOn []string `json:"fail_on,omitempty"`

	logger  *zap.Logger
	checker *checker
	// exiting reports whether the process is shutting down; caddy.Exiting
	// outside tests.
	exiting func() bool
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_health",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision validates the options and, for readiness, finds the shared
// stores the llm app uses.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.exiting = caddy.Exiting
	if err := h.validate(); err != nil {
		return err
	}
	if h.Check != CheckReady {
		return nil
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	var stores []store
	// Without an llm app in the config there is no shared store to wait
	// for; AppIfConfigured does not create one.
	if a, err := ctx.AppIfConfigured(app.ID); err == nil {
		stores = appStores(a.(*app.App), h.FailOn)
	}
	h.checker = h.newChecker(stores)
	h.checker.observe = observeStore
	return nil
}

func (h *Handler) validate() error {
	switch h.Check {
	case CheckLive, CheckReady:
	default:
		return fmt.Errorf("llm_health: check must be %q or %q, got %q", CheckLive, CheckReady, h.Check)
	}
	if h.Timeout < 0 || time.Duration(h.Timeout) > MaxTimeout {
		return fmt.Errorf("llm_health: timeout must be between 0 (the default, %s) and %s", DefaultTimeout, MaxTimeout)
	}
	if h.Cache != nil && (*h.Cache < 0 || time.Duration(*h.Cache) > MaxCache) {
		return fmt.Errorf("llm_health: cache must be between 0 and %s", MaxCache)
	}
	if len(h.FailOn) > 0 && h.Check != CheckReady {
		return fmt.Errorf("llm_health: fail_on applies to ready only")
	}
	for _, name := range h.FailOn {
		if name != StoreRedis && name != StoreLedger {
			return fmt.Errorf("llm_health: fail_on: unknown store %q (want %q or %q)", name, StoreRedis, StoreLedger)
		}
	}
	return nil
}

func (h *Handler) newChecker(stores []store) *checker {
	c := &checker{stores: stores, timeout: DefaultTimeout, ttl: DefaultCache, now: time.Now}
	if h.Timeout > 0 {
		c.timeout = time.Duration(h.Timeout)
	}
	if h.Cache != nil {
		c.ttl = time.Duration(*h.Cache)
	}
	logger := h.logger
	c.onChange = func(r *result) {
		if r.ready && len(r.degraded) == 0 {
			logger.Info("ready: every shared store answers")
			return
		}
		fields := make([]zap.Field, 0, len(r.errs)+2)
		if len(r.failing) > 0 {
			fields = append(fields, zap.Strings("failing", r.failing))
		}
		if len(r.degraded) > 0 {
			fields = append(fields, zap.Strings("degraded", r.degraded))
		}
		for i, err := range r.errs {
			if err != nil {
				fields = append(fields, zap.NamedError(stores[i].name, err))
			}
		}
		if !r.ready {
			logger.Warn("not ready: a shared store named in fail_on does not answer", fields...)
			return
		}
		logger.Warn("degraded: a shared store does not answer; still ready, since every replica shares it", fields...)
	}
	return c
}

// redisPinger pings the llm app's Redis client.
type redisPinger struct{ a *app.App }

func (p redisPinger) Ping(ctx context.Context) error {
	c := p.a.RedisClient()
	if c == nil {
		return nil
	}
	return c.Ping(ctx).Err()
}

// appStores lists the shared stores a configures: Redis, and the
// ledger's database (its store implements Pinger); those named in failOn
// fail readiness.
func appStores(a *app.App, failOn []string) []store {
	var out []store
	if a.RedisClient() != nil {
		out = append(out, store{StoreRedis, redisPinger{a}, slices.Contains(failOn, StoreRedis)})
	}
	if l := a.UsageLedger(); l != nil {
		if p, ok := l.Store().(Pinger); ok {
			out = append(out, store{StoreLedger, p, slices.Contains(failOn, StoreLedger)})
		}
	}
	return out
}

// ServeHTTP answers the probe.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if !h.AccessLog {
		caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		apierror.Write(w, apierror.New(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest,
			"health endpoints answer GET and HEAD"))
		return nil
	}
	if h.Check == CheckLive {
		write(w, r, http.StatusOK, bodyOK)
		return nil
	}
	if h.exiting() {
		write(w, r, http.StatusServiceUnavailable, bodyDraining)
		return nil
	}
	res, ok := h.checker.check(r.Context())
	switch {
	case !ok:
		// The probe's own request ended before the first round did.
		write(w, r, http.StatusServiceUnavailable, notReadyBody([]string{"checking"}))
	case res.ready:
		write(w, r, http.StatusOK, res.body)
	default:
		write(w, r, http.StatusServiceUnavailable, res.body)
	}
	return nil
}

// contentLengths spells the lengths of the answers without strconv on
// each probe.
var contentLengths [128][]string

func init() {
	for i := range contentLengths {
		contentLengths[i] = []string{strconv.Itoa(i)}
	}
}

func write(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	hd := w.Header()
	hd["Content-Type"] = jsonType
	hd["Cache-Control"] = noStore
	if n := len(body); n < len(contentLengths) {
		hd["Content-Length"] = contentLengths[n]
	} else {
		hd["Content-Length"] = []string{strconv.Itoa(n)}
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// Shared header values; net/http only reads them.
var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
