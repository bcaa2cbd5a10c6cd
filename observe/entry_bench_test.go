package observe

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/logfilter"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// typicalEntry is a typical non-streaming chat completion's entry: one
// attempt, usage and cost, no metadata.
func typicalEntry() *Entry {
	return &Entry{
		TraceID: "0f4b6c1e-2a7d-4c59-9e0b-3d1f8a6b2c71", KeyName: "default", Workspace: "ws-0b1c2d3e",
		Operation: providers.OpChat, Method: "POST", Path: "/chat/completions",
		Provider: "openai", Model: "gpt-4o-mini", Status: 200, CacheState: "DISABLED",
		Start: entryStart, FirstByte: entryStart.Add(835 * time.Microsecond),
		Usage:   &providers.Usage{PromptTokens: 50, CompletionTokens: 40, TotalTokens: 90},
		CostUSD: 0.0000315, CostKnown: true,
		Attempts: []Attempt{{Target: "config", Provider: "openai", Status: 200, Duration: 771 * time.Microsecond, Outcome: "ok"}},
	}
}

// BenchmarkEntryEncode encodes a typical entry alone: as the access log's
// llm object (the field built per request, as Log does, into Caddy's json
// encoder), and as the gateway's own entry (write, to a json core).
//
// go test ./observe -run '^$' -bench EntryEncode -benchmem
func BenchmarkEntryEncode(b *testing.B) {
	e := typicalEntry()
	b.Run("object", func(b *testing.B) {
		enc := caddyJSON(b)
		b.ReportAllocs()
		for b.Loop() {
			buf, err := enc.EncodeEntry(zapcore.Entry{}, []zapcore.Field{e.accessField(entryNow)})
			if err != nil {
				b.Fatal(err)
			}
			buf.Free()
		}
	})
	b.Run("write", func(b *testing.B) {
		logger := zap.New(zapcore.NewCore(caddyJSON(b), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
		b.ReportAllocs()
		for b.Loop() {
			e.write(logger, entryNow)
		}
	})
}

// BenchmarkAccessLogLine logs a whole access log line of a gateway
// request the way Caddy's logRequest does (the request through WithLazy,
// then bytes_read … resp_headers and the extra llm field), shaped like
// the lines of the examples' Caddyfile: 8 request headers, 11 response
// headers (6 of them x-gateway-*), the real llm object. Through
//
//   - llm_secrets: `format llm_secrets { wrap json }`, what the examples use;
//   - json: plain `format json`, the floor.
//
// go test ./observe -run '^$' -bench AccessLogLine -benchmem
func BenchmarkAccessLogLine(b *testing.B) {
	secrets := &logfilter.Encoder{WrappedRaw: json.RawMessage(`{"format":"json"}`)}
	if err := secrets.Provision(benchContext(b)); err != nil {
		b.Fatal(err)
	}
	encoders := []struct {
		name string
		enc  zapcore.Encoder
	}{
		{"llm_secrets", secrets},
		{"json", caddyJSON(b)},
	}
	r, _ := http.NewRequest("POST", "http://127.0.0.1:9302/v1/chat/completions", nil)
	r.RemoteAddr, r.RequestURI, r.Proto = "127.0.0.1:55854", "/v1/chat/completions", "HTTP/1.1"
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: "127.0.0.1"}))
	r.Header = http.Header{
		"User-Agent":            {"curl/7.88.1"},
		"X-Gateway-Api-Key":     {"gw-secret"},
		"Authorization":         {"Bearer sk-client-secret"},
		"Content-Type":          {"application/json"},
		"Accept":                {"*/*"},
		"X-Gateway-Provider":    {"openai"},
		"X-Gateway-Custom-Host": {"http://127.0.0.1:9301/v1"},
		"Content-Length":        {"198"},
	}
	resp := http.Header{
		"X-Gateway-Cache-Status":           {"DISABLED"},
		"X-Gateway-Cost":                   {"0.0000315"},
		"Server":                           {"Caddy"},
		"Content-Type":                     {"application/json"},
		"X-Gateway-Trace-Id":               {"0f4b6c1e-2a7d-4c59-9e0b-3d1f8a6b2c71"},
		"X-Gateway-Last-Used-Option-Index": {"config"},
		"X-Gateway-Retry-Attempt-Count":    {"0"},
		"Via":                              {"1.1 Caddy"},
		"Content-Length":                   {"556"},
		"Date":                             {"Mon, 01 Jan 2024 00:00:00 GMT"},
		"X-Gateway-Provider":               {"openai"},
	}
	e := typicalEntry()
	for _, enc := range encoders {
		b.Run(enc.name, func(b *testing.B) {
			logger := zap.New(zapcore.NewCore(enc.enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel)).Named("http.log.access.log0")
			b.ReportAllocs()
			for b.Loop() {
				fields := []zapcore.Field{
					zap.Int("bytes_read", 198), zap.String("user_id", ""), zap.Duration("duration", 977499*time.Nanosecond),
					zap.Int("size", 556), zap.Int("status", 200),
					zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: resp}),
					e.accessField(entryNow),
				}
				logger.WithLazy(zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r})).Info("handled request", fields...)
			}
		})
	}
}

// caddyJSON is Caddy's json log encoder with its defaults.
func caddyJSON(b *testing.B) zapcore.Encoder {
	je := &logging.JSONEncoder{}
	if err := je.Provision(benchContext(b)); err != nil {
		b.Fatal(err)
	}
	return je
}

func benchContext(b *testing.B) caddy.Context {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	return ctx
}
