package mcp

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// Telemetry of calls, after the OpenTelemetry conventions for the Model
// Context Protocol (semantic-conventions-genai, docs/gen-ai/mcp.md; in
// development): each tools/call and prompts/get is one observation of
// mcp.server.operation.duration (the caller's call, as the gateway
// serves it) and, when it reached the server, one of
// mcp.client.operation.duration (the gateway's call upstream), with the
// names the OTel Prometheus exporter gives them; and, when the request is
// traced, the upstream call is a CLIENT span "{method} {tool}" under
// Caddy's server span, its trace context sent to the server both as
// params._meta.traceparent (the conventions' carrier) and as the HTTP
// traceparent header.
//
// Labels stay bounded: the method is one of two, the server one the
// operator declared, the tool or prompt name one the server listed (a
// name the caller made up, refused or unknown, is never a label value),
// and error_type one of the outcomes below or a JSON-RPC error code.

// durationBuckets are the conventions' advised boundaries for the MCP
// operation durations.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

var callLabels = []string{"mcp_method_name", "mcp_server", "gen_ai_tool_name", "gen_ai_prompt_name", "error_type"}

var (
	serverOperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_server_operation_duration_seconds",
		Help:    "Duration of each MCP tools/call and prompts/get the gateway served (mcp.server.operation.duration); error_type is set when it did not succeed.",
		Buckets: durationBuckets,
	}, callLabels)
	clientOperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_client_operation_duration_seconds",
		Help:    "Duration of each call the gateway made to an MCP server (mcp.client.operation.duration); error_type is set when it did not succeed.",
		Buckets: durationBuckets,
	}, callLabels)
)

var collectors = metricset.Declare(serverOperationDuration, clientOperationDuration)

// RegisterMetrics registers the MCP collectors into reg, which may
// already hold them from an earlier load.
func RegisterMetrics(reg *prometheus.Registry) error {
	return metricset.Register(reg, collectors)
}

// errorType is a call's error.type: empty for a success, tool_error for
// a tool that answered isError (the conventions' value), the JSON-RPC
// code of a server's error, else the outcome.
func errorType(status string, code int64) string {
	switch status {
	case statusOK:
		return ""
	case statusError:
		return strconv.FormatInt(code, 10)
	}
	return status
}

// labelValues are rec's label values in callLabels' order.
func (r *callRecord) labelValues(errType string) []string {
	tool, prompt := "", ""
	if r.Upstream != "" {
		if r.Method == methodGetPrompt {
			prompt = r.Upstream
		} else {
			tool = r.Upstream
		}
	}
	return []string{r.Method, r.Server, tool, prompt, errType}
}

// observeServer records the finished call rec as the gateway served it.
func observeServer(rec *callRecord) {
	rec.mu.Lock()
	values := rec.labelValues(errorType(rec.Status, rec.Code))
	d := rec.Duration
	rec.mu.Unlock()
	serverOperationDuration.WithLabelValues(values...).Observe(d.Seconds())
}

// observeClient records the upstream call of rec that took d.
func observeClient(rec *callRecord, d time.Duration) {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	values := rec.labelValues(errorType(rec.Status, rec.Code))
	rec.mu.Unlock()
	clientOperationDuration.WithLabelValues(values...).Observe(d.Seconds())
}

// Span attributes of the conventions.
var (
	attrMethod        = attribute.Key("mcp.method.name")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrPromptName    = attribute.Key("gen_ai.prompt.name")
	attrOperationName = attribute.Key("gen_ai.operation.name")
	attrSessionID     = attribute.Key("mcp.session.id")
	attrTransport     = attribute.Key("network.transport")
	attrServerAddress = attribute.Key("server.address")
	attrServerPort    = attribute.Key("server.port")
	attrErrorType     = attribute.Key("error.type")
	attrServerName    = attribute.Key("llm_gateway.mcp.server")
)

// tracerName is the instrumentation scope of the MCP gateway's spans.
const tracerName = "github.com/caddy-llm-gateway/caddy-llm-gateway/mcp"

// traceContext reads and writes W3C traceparent/tracestate.
var traceContext propagation.TraceContext

// callSpan is the CLIENT span of one upstream call; its zero value (the
// request is not traced) does nothing.
type callSpan struct {
	span trace.Span
}

// startCallSpan starts the span of calling name (method tools/call or
// prompts/get) on u, as a child of the span in ctx, when that span
// records; it creates nothing otherwise.
func startCallSpan(ctx context.Context, u *remote, method, name, sessionID string) (context.Context, callSpan) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, callSpan{}
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, attrMethod.String(method), attrTransport.String("tcp"), attrServerName.String(u.cfg.Name))
	if method == methodGetPrompt {
		attrs = append(attrs, attrPromptName.String(name))
	} else {
		attrs = append(attrs, attrToolName.String(name), attrOperationName.String("execute_tool"))
	}
	if sessionID != "" {
		attrs = append(attrs, attrSessionID.String(sessionID))
	}
	if host, port, err := net.SplitHostPort(u.cfg.URL.Host); err == nil {
		attrs = append(attrs, attrServerAddress.String(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attrServerPort.Int(p))
		}
	} else if u.cfg.URL.Host != "" {
		attrs = append(attrs, attrServerAddress.String(u.cfg.URL.Host))
	}
	tracer := parent.TracerProvider().Tracer(tracerName)
	ctx, span := tracer.Start(ctx, method+" "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, callSpan{span: span}
}

// end records the call's outcome (an empty errType is a success).
func (s callSpan) end(errType string) {
	if s.span == nil {
		return
	}
	if errType != "" {
		s.span.SetAttributes(attrErrorType.String(errType))
		s.span.SetStatus(codes.Error, errType)
	}
	s.span.End()
}

// traceMeta returns the trace context of ctx's span as params._meta
// members (traceparent, tracestate), nil when ctx carries none.
func traceMeta(ctx context.Context) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	meta := make(map[string]any, len(carrier))
	for k, v := range carrier {
		meta[k] = v
	}
	return meta
}

// injectTrace writes the trace context of r's span into r's headers,
// replacing any: a call's HTTP request carries the call's span.
func injectTrace(r *http.Request) {
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		traceContext.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
}

// errorType is the record's error.type so far (nil-safe).
func (r *callRecord) errorType() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return errorType(r.Status, r.Code)
}
