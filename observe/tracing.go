package observe

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/caddy-llm-gateway/caddy-llm-gateway/observe"

// Attribute keys of the OpenTelemetry GenAI semantic conventions (v1.41,
// research/wave2.md §4.1), written out so a convention rename is a
// one-line change here rather than a semconv package upgrade.
const (
	attrOperationName      = attribute.Key("gen_ai.operation.name")
	attrProviderName       = attribute.Key("gen_ai.provider.name")
	attrRequestModel       = attribute.Key("gen_ai.request.model")
	attrRequestStream      = attribute.Key("gen_ai.request.stream")
	attrRequestMaxTokens   = attribute.Key("gen_ai.request.max_tokens")
	attrRequestTemperature = attribute.Key("gen_ai.request.temperature")
	attrRequestTopP        = attribute.Key("gen_ai.request.top_p")
	attrRequestChoiceCount = attribute.Key("gen_ai.request.choice.count")
	attrResponseModel      = attribute.Key("gen_ai.response.model")
	attrResponseID         = attribute.Key("gen_ai.response.id")
	attrFinishReasons      = attribute.Key("gen_ai.response.finish_reasons")
	attrTimeToFirstChunk   = attribute.Key("gen_ai.response.time_to_first_chunk")
	attrInputTokens        = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens       = attribute.Key("gen_ai.usage.output_tokens")
	attrCacheReadTokens    = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrReasoningTokens    = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	attrInputMessages      = attribute.Key("gen_ai.input.messages")
	attrOutputMessages     = attribute.Key("gen_ai.output.messages")
	attrErrorType          = attribute.Key("error.type")
	attrServerAddress      = attribute.Key("server.address")
	attrServerPort         = attribute.Key("server.port")
	attrOpenAIAPIType      = attribute.Key("openai.api.type")
	// The gateway's own attributes: which attempt of the request this
	// span is, and which configured target it called.
	attrAttempt = attribute.Key("gateway.attempt")
	attrTarget  = attribute.Key("gateway.target")
)

// GenAI operation names (gen_ai.operation.name).
const (
	OperationChat           = "chat"
	OperationTextCompletion = "text_completion"
	OperationEmbeddings     = "embeddings"
)

// OperationName returns gen_ai.operation.name for a gateway operation:
// chat completions and Responses are "chat" (openai.api.type tells them
// apart), legacy completions "text_completion", embeddings "embeddings".
// Operations the conventions do not name keep the gateway's name
// ("images", "audio.speech", …), a bounded set.
func OperationName(op providers.Operation) string {
	switch op {
	case providers.OpChat, providers.OpResponses, providers.OpMessages:
		return OperationChat
	case providers.OpCompletions:
		return OperationTextCompletion
	case providers.OpEmbeddings:
		return OperationEmbeddings
	}
	return string(op)
}

// providerNames maps gateway provider slugs (and the spec's neutral
// aliases) to gen_ai.provider.name's well-known values.
var providerNames = map[string]string{
	"openai":        "openai",
	"vendor":        "openai",
	"anthropic":     "anthropic",
	"bedrock":       "aws.bedrock",
	"clouda":        "aws.bedrock",
	"vertex-ai":     "gcp.vertex_ai",
	"cloudc":        "gcp.vertex_ai",
	"google":        "gcp.gemini",
	"azure-openai":  "azure.ai.openai",
	"cloudb":        "azure.ai.openai",
	"azure-ai":      "azure.ai.inference",
	"cohere":        "cohere",
	"mistral-ai":    "mistral_ai",
	"groq":          "groq",
	"deepseek":      "deepseek",
	"perplexity-ai": "perplexity",
	"x-ai":          "x_ai",
}

// ProviderName returns gen_ai.provider.name for a gateway provider slug:
// the conventions' value when they define one, else the slug itself
// (together-ai, fireworks-ai, …), so the value set stays the registered
// providers'.
func ProviderName(slug string) string {
	if n, ok := providerNames[slug]; ok {
		return n
	}
	return slug
}

// AttemptInfo describes one upstream call, known before it is sent.
type AttemptInfo struct {
	// Operation is the gateway operation; its GenAI name comes from
	// OperationName.
	Operation providers.Operation
	// Provider is the gateway slug of the target's provider.
	Provider string
	// RequestModel is the model sent upstream.
	RequestModel string
	// ServerAddress and ServerPort are the provider's host and port.
	ServerAddress string
	ServerPort    int
	Stream        bool
	// MaxTokens, Temperature, TopP and ChoiceCount are recorded when set
	// (ChoiceCount only when not 1, as the conventions ask).
	MaxTokens   int64
	Temperature *float64
	TopP        *float64
	ChoiceCount int
	// Attempt counts the request's upstream calls from 0; Target is the
	// configured target's JSON path (config.targets[1]). Retries and
	// fallbacks are sibling spans told apart by these.
	Attempt int
	Target  string
	// RecordContent says the operator opted in to recording message
	// content; InputMessages (the request's messages as JSON) is recorded
	// only then.
	RecordContent bool
	InputMessages string
}

// Result is what an upstream call produced.
type Result struct {
	// StatusCode is the provider's HTTP status, 0 when none arrived.
	StatusCode    int
	ResponseModel string
	ResponseID    string
	FinishReasons []string
	Usage         *providers.Usage
	// TimeToFirstChunk is set for streams.
	TimeToFirstChunk time.Duration
	// ErrorType is error.type; when empty and the call failed, it is
	// derived by ErrorType from StatusCode and Err.
	ErrorType string
	Err       error
	// OutputMessages (JSON) is recorded only when the attempt's
	// RecordContent was set.
	OutputMessages string
}

// failed reports whether r describes a failed call.
func (r *Result) failed() bool {
	return r.Err != nil || r.ErrorType != "" || r.StatusCode == 0 || r.StatusCode >= 400
}

// ErrorType returns a low-cardinality error.type for a failed call: the
// HTTP status code when the provider answered with an error, "timeout"
// for deadlines, "canceled" when the client went away, else "_OTHER".
func ErrorType(status int, err error) string {
	switch {
	case status >= 400 && status <= 599:
		return strconv.Itoa(status)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// AttemptSpan is the CLIENT span of one upstream call. Its zero value,
// returned when the request is not traced, does nothing.
type AttemptSpan struct {
	ctx    context.Context
	span   trace.Span
	record bool
	// content is AttemptInfo.RecordContent.
	content bool
}

// traceContext writes W3C traceparent/tracestate headers.
var traceContext propagation.TraceContext

// StartAttempt starts the span of an upstream call as a child of the span
// in ctx — the HTTP server span of Caddy's tracing directive — using that
// span's tracer provider, so both reach the same exporter. Without a
// recording span in ctx (tracing off, or the trace not sampled) it
// creates nothing and allocates nothing; Inject still propagates an
// unsampled trace context so the provider does not start a trace of its
// own.
func StartAttempt(ctx context.Context, info AttemptInfo) (context.Context, AttemptSpan) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, AttemptSpan{ctx: ctx}
	}
	op := OperationName(info.Operation)
	provider := ProviderName(info.Provider)
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		attrOperationName.String(op),
		attrProviderName.String(provider),
		attrAttempt.Int(info.Attempt),
	)
	if info.RequestModel != "" {
		attrs = append(attrs, attrRequestModel.String(info.RequestModel))
	}
	if info.ServerAddress != "" {
		attrs = append(attrs, attrServerAddress.String(info.ServerAddress))
	}
	if info.ServerPort > 0 {
		attrs = append(attrs, attrServerPort.Int(info.ServerPort))
	}
	if info.Stream {
		attrs = append(attrs, attrRequestStream.Bool(true))
	}
	if info.MaxTokens > 0 {
		attrs = append(attrs, attrRequestMaxTokens.Int64(info.MaxTokens))
	}
	if info.Temperature != nil {
		attrs = append(attrs, attrRequestTemperature.Float64(*info.Temperature))
	}
	if info.TopP != nil {
		attrs = append(attrs, attrRequestTopP.Float64(*info.TopP))
	}
	if info.ChoiceCount > 1 {
		attrs = append(attrs, attrRequestChoiceCount.Int(info.ChoiceCount))
	}
	if info.Target != "" {
		attrs = append(attrs, attrTarget.String(info.Target))
	}
	switch {
	case info.Operation == providers.OpResponses:
		attrs = append(attrs, attrOpenAIAPIType.String("responses"))
	case info.Operation == providers.OpChat && (provider == "openai" || provider == "azure.ai.openai"):
		attrs = append(attrs, attrOpenAIAPIType.String("chat_completions"))
	}
	if info.RecordContent && info.InputMessages != "" {
		attrs = append(attrs, attrInputMessages.String(info.InputMessages))
	}
	name := op
	if info.RequestModel != "" {
		name = op + " " + info.RequestModel
	}
	tracer := parent.TracerProvider().Tracer(tracerName)
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, AttemptSpan{ctx: ctx, span: span, record: true, content: info.RecordContent}
}

// Inject writes the W3C traceparent (and tracestate) of the attempt into
// the upstream request's headers, replacing any the client sent. It
// writes nothing when the request carries no trace context.
func (s AttemptSpan) Inject(h http.Header) {
	if s.ctx == nil || h == nil {
		return
	}
	traceContext.Inject(s.ctx, propagation.HeaderCarrier(h))
}

// Recording reports whether the attempt has a span that records.
func (s AttemptSpan) Recording() bool { return s.record }

// End records the result and ends the span; it must be called once per
// started attempt (a zero AttemptSpan ignores it).
func (s AttemptSpan) End(r Result) {
	if !s.record {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	if r.ResponseModel != "" {
		attrs = append(attrs, attrResponseModel.String(r.ResponseModel))
	}
	if r.ResponseID != "" {
		attrs = append(attrs, attrResponseID.String(r.ResponseID))
	}
	if len(r.FinishReasons) > 0 {
		attrs = append(attrs, attrFinishReasons.StringSlice(r.FinishReasons))
	}
	if u := r.Usage; u != nil {
		attrs = append(attrs, attrInputTokens.Int64(u.PromptTokens), attrOutputTokens.Int64(u.CompletionTokens))
		if u.CachedTokens > 0 {
			attrs = append(attrs, attrCacheReadTokens.Int64(u.CachedTokens))
		}
		if u.ReasoningTokens > 0 {
			attrs = append(attrs, attrReasoningTokens.Int64(u.ReasoningTokens))
		}
	}
	if r.TimeToFirstChunk > 0 {
		attrs = append(attrs, attrTimeToFirstChunk.Float64(r.TimeToFirstChunk.Seconds()))
	}
	if s.content && r.OutputMessages != "" {
		attrs = append(attrs, attrOutputMessages.String(r.OutputMessages))
	}
	if r.failed() {
		et := r.ErrorType
		if et == "" {
			et = ErrorType(r.StatusCode, r.Err)
		}
		attrs = append(attrs, attrErrorType.String(et))
		// The description is error.type, never Err's text: transport
		// errors quote the upstream URL, which may carry a key (Gemini's
		// ?key=).
		s.span.SetStatus(codes.Error, et)
	}
	s.span.SetAttributes(attrs...)
	s.span.End()
}
