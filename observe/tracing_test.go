package observe

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// serverSpan starts a SERVER span the way Caddy's tracing directive does
// (otelhttp with an SDK provider) and returns its context.
func serverSpan(t testing.TB, opts ...sdktrace.TracerProviderOption) (context.Context, trace.Span, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(rec)}, opts...)...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("caddy").Start(context.Background(), "POST /v1/chat/completions", trace.WithSpanKind(trace.SpanKindServer))
	return ctx, span, rec
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func TestAttemptSpans(t *testing.T) {
	tests := []struct {
		name     string
		info     AttemptInfo
		result   Result
		wantName string
		want     map[string]string
		absent   []string
		status   codes.Code
	}{
		{
			name: "chat",
			info: AttemptInfo{Operation: providers.OpChat, Provider: "openai", RequestModel: "gpt-4o-mini", ServerAddress: "api.openai.com", ServerPort: 443,
				MaxTokens: 100, Temperature: ptr(0.2), Target: "config", InputMessages: `[{"role":"user","content":"secret"}]`},
			result:   Result{StatusCode: 200, ResponseModel: "gpt-4o-mini-2024-07-18", ResponseID: "chatcmpl-1", FinishReasons: []string{"stop"}, Usage: &providers.Usage{PromptTokens: 12, CompletionTokens: 7, CachedTokens: 4, ReasoningTokens: 2}, OutputMessages: "secret answer"},
			wantName: "chat gpt-4o-mini",
			want: map[string]string{
				"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
				"gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.response.id": "chatcmpl-1", "gen_ai.response.finish_reasons": `["stop"]`,
				"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "7", "gen_ai.usage.cache_read.input_tokens": "4", "gen_ai.usage.reasoning.output_tokens": "2",
				"server.address": "api.openai.com", "server.port": "443", "openai.api.type": "chat_completions",
				"gen_ai.request.max_tokens": "100", "gen_ai.request.temperature": "0.2", "gateway.attempt": "0", "gateway.target": "config",
			},
			absent: []string{"error.type", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.request.stream"},
			status: codes.Unset,
		},
		{
			name:     "stream with content opted in",
			info:     AttemptInfo{Operation: providers.OpChat, Provider: "anthropic", RequestModel: "claude-3-5-haiku-20241022", Stream: true, RecordContent: true, InputMessages: `[{"role":"user","content":"hi"}]`},
			result:   Result{StatusCode: 200, TimeToFirstChunk: 250 * time.Millisecond, OutputMessages: `[{"role":"assistant","content":"hello"}]`},
			wantName: "chat claude-3-5-haiku-20241022",
			want: map[string]string{"gen_ai.provider.name": "anthropic", "gen_ai.request.stream": "true", "gen_ai.response.time_to_first_chunk": "0.25",
				"gen_ai.input.messages": `[{"role":"user","content":"hi"}]`, "gen_ai.output.messages": `[{"role":"assistant","content":"hello"}]`},
			absent: []string{"openai.api.type"},
		},
		{
			name:     "responses on bedrock, upstream 429",
			info:     AttemptInfo{Operation: providers.OpResponses, Provider: "bedrock", RequestModel: "amazon.nova-pro-v1:0", Attempt: 2, Target: "config.targets[1]"},
			result:   Result{StatusCode: 429},
			wantName: "chat amazon.nova-pro-v1:0",
			want:     map[string]string{"gen_ai.provider.name": "aws.bedrock", "openai.api.type": "responses", "error.type": "429", "gateway.attempt": "2", "gateway.target": "config.targets[1]"},
			status:   codes.Error,
		},
		{
			name:     "embeddings on vertex, timeout",
			info:     AttemptInfo{Operation: providers.OpEmbeddings, Provider: "vertex-ai", RequestModel: "text-embedding-005"},
			result:   Result{Err: context.DeadlineExceeded},
			wantName: "embeddings text-embedding-005",
			want:     map[string]string{"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "gcp.vertex_ai", "error.type": "timeout"},
			status:   codes.Error,
		},
		{
			name:     "completions on azure, transport error",
			info:     AttemptInfo{Operation: providers.OpCompletions, Provider: "cloudb", RequestModel: "gpt-35-turbo-instruct"},
			result:   Result{Err: errors.New(`Post "https://x/?key=SECRET": connection refused`)},
			wantName: "text_completion gpt-35-turbo-instruct",
			want:     map[string]string{"gen_ai.operation.name": "text_completion", "gen_ai.provider.name": "azure.ai.openai", "error.type": "_OTHER"},
			status:   codes.Error,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, parent, rec := serverSpan(t)
			actx, span := StartAttempt(ctx, tt.info)
			if !span.Recording() || trace.SpanFromContext(actx).SpanContext().SpanID() == parent.SpanContext().SpanID() {
				t.Fatal("no child span started")
			}
			span.End(tt.result)
			parent.End()
			ended := rec.Ended()
			if len(ended) != 2 {
				t.Fatalf("%d spans ended, want 2", len(ended))
			}
			s := ended[0]
			if s.Name() != tt.wantName || s.SpanKind() != trace.SpanKindClient {
				t.Fatalf("span %q kind %v; want %q CLIENT", s.Name(), s.SpanKind(), tt.wantName)
			}
			if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Fatal("attempt span is not a child of the server span")
			}
			got := attrMap(s.Attributes())
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q; want %q", k, got[k], v)
				}
			}
			for _, k := range tt.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s recorded: %q", k, got[k])
				}
			}
			if s.Status().Code != tt.status {
				t.Errorf("status %v; want %v", s.Status().Code, tt.status)
			}
			if strings.Contains(s.Status().Description, "SECRET") {
				t.Errorf("status description leaks the error text: %q", s.Status().Description)
			}
		})
	}
}

func TestAttemptSpansAreSiblings(t *testing.T) {
	ctx, parent, rec := serverSpan(t)
	for i, p := range []string{"openai", "openai", "anthropic"} {
		_, s := StartAttempt(ctx, AttemptInfo{Operation: providers.OpChat, Provider: p, RequestModel: "m", Attempt: i})
		s.End(Result{StatusCode: 503})
	}
	parent.End()
	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans", len(ended))
	}
	for _, s := range ended[:3] {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Fatalf("attempt %q is not a child of the server span", s.Name())
		}
	}
}

func TestInjectTraceparent(t *testing.T) {
	t.Run("recording", func(t *testing.T) {
		ctx, _, _ := serverSpan(t)
		actx, span := StartAttempt(ctx, AttemptInfo{Operation: providers.OpChat, Provider: "openai", RequestModel: "m"})
		h := http.Header{"Traceparent": {"00-client-supplied"}}
		span.Inject(h)
		sc := trace.SpanFromContext(actx).SpanContext()
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if got := h.Get("traceparent"); got != want {
			t.Fatalf("traceparent %q; want %q", got, want)
		}
		span.End(Result{StatusCode: 200})
	})
	t.Run("not sampled", func(t *testing.T) {
		ctx, parent, rec := serverSpan(t, sdktrace.WithSampler(sdktrace.NeverSample()))
		_, span := StartAttempt(ctx, AttemptInfo{Operation: providers.OpChat, Provider: "openai", RequestModel: "m"})
		if span.Recording() {
			t.Fatal("span recorded for an unsampled trace")
		}
		h := http.Header{}
		span.Inject(h)
		sc := parent.SpanContext()
		if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-00"; h.Get("traceparent") != want {
			t.Fatalf("traceparent %q; want %q", h.Get("traceparent"), want)
		}
		span.End(Result{StatusCode: 500})
		if n := len(rec.Ended()); n != 0 {
			t.Fatalf("%d spans ended", n)
		}
	})
	t.Run("no tracing", func(t *testing.T) {
		_, span := StartAttempt(context.Background(), AttemptInfo{Operation: providers.OpChat})
		h := http.Header{}
		span.Inject(h)
		span.End(Result{})
		if len(h) != 0 {
			t.Fatalf("headers written without a trace: %v", h)
		}
	})
}

func TestProviderName(t *testing.T) {
	for slug, want := range map[string]string{
		"openai": "openai", "vendor": "openai", "anthropic": "anthropic", "bedrock": "aws.bedrock", "vertex-ai": "gcp.vertex_ai",
		"google": "gcp.gemini", "azure-openai": "azure.ai.openai", "azure-ai": "azure.ai.inference", "cohere": "cohere",
		"mistral-ai": "mistral_ai", "x-ai": "x_ai", "perplexity-ai": "perplexity", "together-ai": "together-ai",
	} {
		if got := ProviderName(slug); got != want {
			t.Errorf("ProviderName(%q) = %q; want %q", slug, got, want)
		}
	}
}

func TestStartAttemptUntracedAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	h := http.Header{}
	info := AttemptInfo{Operation: providers.OpChat, Provider: "openai", RequestModel: "gpt-4o"}
	r := Result{StatusCode: 200, Usage: &providers.Usage{PromptTokens: 1}}
	if n := testing.AllocsPerRun(100, func() {
		_, s := StartAttempt(ctx, info)
		s.Inject(h)
		s.End(r)
	}); n != 0 {
		t.Fatalf("%v allocations per untraced attempt", n)
	}
}

func BenchmarkAttemptSpan(b *testing.B) {
	info := AttemptInfo{Operation: providers.OpChat, Provider: "openai", RequestModel: "gpt-4o-mini", ServerAddress: "api.openai.com", ServerPort: 443, Target: "config.targets[0]"}
	res := Result{StatusCode: 200, ResponseModel: "gpt-4o-mini-2024-07-18", ResponseID: "chatcmpl-1", FinishReasons: []string{"stop"}, Usage: &providers.Usage{PromptTokens: 100, CompletionTokens: 50, TotalTokens: 150}}
	b.Run("off", func(b *testing.B) {
		ctx := context.Background()
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			_, s := StartAttempt(ctx, info)
			s.Inject(h)
			s.End(res)
		}
	})
	b.Run("on", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		ctx, _ := tp.Tracer("caddy").Start(context.Background(), "POST /v1/chat/completions", trace.WithSpanKind(trace.SpanKindServer))
		h := http.Header{}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, s := StartAttempt(ctx, info)
			s.Inject(h)
			s.End(res)
			if i%1024 == 0 {
				exp.Reset()
			}
		}
	})
}
