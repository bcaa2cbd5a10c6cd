package ratelimit

import (
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// rejectionsTotal counts 429 answers. It is created once per process and
// registered into every config's registry, as observe's collectors are,
// so it stays monotonic across reloads. Its labels are bounded (two policy
// types, three units): never a policy id, key or tenant.
var rejectionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "llm_gateway_ratelimit_rejections_total",
	Help: "Requests llm_ratelimit answered with 429, by the refusing policy's type (requests, tokens, cost) and unit (rpm, rph, rpd).",
}, []string{"type", "unit"})

var rateLimitCollectors = metricset.Declare(rejectionsTotal)

// registerMetrics registers the handler's collectors into reg, which may
// already hold them from an earlier load.
func registerMetrics(reg *prometheus.Registry) error {
	return metricset.Register(reg, rateLimitCollectors)
}

// reject answers 429 for the policy that refused, and logs and counts the
// answer as the gateway does its own: the gateway fields join Caddy's
// access log entry when the site logs, and make the handler's own entry
// otherwise. Only policies that matched the request, which are all of the
// caller's tenant or the site's, are named.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, v *verdict) {
	g := v.refused
	traceID, alias := ingress.Get(r.Header, ingress.TraceID)
	if traceID == "" {
		traceID = uuid.NewString()
	}
	prefix := ingress.Prefix
	if alias {
		prefix = ingress.AliasPrefix
	}
	w.Header().Set(prefix+ingress.TraceID, traceID)
	setRetryHeaders(w.Header(), g.dec.RetryAfter)
	e := apierror.New(http.StatusTooManyRequests, apierror.TypeRateLimit, rejectMessage(g.policy, g.dec.RetryAfter)).
		WithCode("rate_limit_exceeded")
	writeError(w, r, e)

	rejectionsTotal.WithLabelValues(g.policy.Type, g.policy.Unit).Inc()
	ids := make([]string, 0, len(v.grants)+1)
	ids = append(ids, g.policy.ID)
	for i := range v.grants {
		ids = append(ids, v.grants[i].policy.ID)
	}
	fields := [...]zap.Field{
		zap.String("trace_id", traceID),
		zap.String("api_key_name", v.keyName),
		zap.String("workspace_id", v.workspace),
		zap.String("ratelimit_policy_id", g.policy.ID),
		zap.Strings("ratelimit_policy_ids", ids),
		zap.String("ratelimit_policy_type", g.policy.Type),
		zap.Duration("retry_after", g.dec.RetryAfter),
	}
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok && siteLogs(r) {
		// Caddy's entry has the status, method and path already.
		for _, f := range fields {
			extra.Add(f)
		}
		return
	}
	if h.logger != nil {
		h.logger.Info("rate limit exceeded", append(fields[:], zap.Int("status", http.StatusTooManyRequests),
			zap.String("method", r.Method), zap.String("path", r.URL.Path))...)
	}
}

// siteLogs reports whether Caddy writes an access log entry for r, by the
// rule of caddyhttp.Server's (unexported) shouldLogRequest: the server has
// logs configured and the host is mapped to a logger, or not skipped.
func siteLogs(r *http.Request) bool {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil {
		return false
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	for name := range srv.Logs.LoggerNames {
		if certmagic.MatchWildcard(host, name) {
			return true
		}
	}
	for _, skip := range srv.Logs.SkipHosts {
		if certmagic.MatchWildcard(host, skip) {
			return false
		}
	}
	return !srv.Logs.SkipUnmappedHosts
}
