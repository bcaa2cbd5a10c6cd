package logfilter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkAccessLog logs one access log entry of a gateway request per
// operation the way Caddy does (WithLazy of the request, then the entry
// with the response headers and the gateway's llm object), shaped like
// the lines of the examples' Caddyfile (8 request headers, 11 response
// headers, a typical llm object; observe's BenchmarkAccessLogLine logs
// the real one), through
//
//   - filter: `format filter { wrap json; request>headers llm_secrets }`
//   - encoder: `format llm_secrets { wrap json }`
//   - json: plain `format json` (no masking), the floor.
//
// go test ./logfilter -run '^$' -bench AccessLog -benchmem
func BenchmarkAccessLog(b *testing.B) {
	filter := &logging.FilterEncoder{
		WrappedRaw: json.RawMessage(`{"format":"json"}`),
		FieldsRaw:  map[string]json.RawMessage{"request>headers": json.RawMessage(`{"filter":"llm_secrets"}`)},
	}
	if err := filter.Provision(caddyContext(b)); err != nil {
		b.Fatal(err)
	}
	encoders := []struct {
		name string
		enc  zapcore.Encoder
	}{
		{"filter", filter},
		{"encoder", newEncoder(b, &Encoder{WrappedRaw: json.RawMessage(`{"format":"json"}`)})},
		{"json", plainJSON(b)},
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
	request := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r})
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
	llm := fieldsObj{
		zap.String("trace_id", "0f4b6c1e-2a7d-4c59-9e0b-3d1f8a6b2c71"), zap.String("api_key_name", "default"),
		zap.String("workspace_id", "ws-0b1c2d3e"), zap.String("endpoint", "chat.completions"), zap.String("method", "POST"),
		zap.String("path", "/chat/completions"), zap.String("provider", "openai"), zap.String("model", "gpt-4o-mini"),
		zap.Int("status", 200), zap.Bool("stream", false), zap.Float64("duration_ms", 0.847), zap.Float64("ttfb_ms", 0.835),
		zap.String("cache_status", "DISABLED"),
		zap.Object("usage", fieldsObj{zap.Int64("prompt_tokens", 50), zap.Int64("completion_tokens", 40), zap.Int64("total_tokens", 90)}),
		zap.Float64("cost_usd", 0.0000315),
		zap.Array("attempts", objArray{fieldsObj{
			zap.String("target", "config"), zap.String("provider", "openai"), zap.Int("status", 200),
			zap.Float64("duration_ms", 0.771), zap.String("outcome", "ok"),
		}}),
	}
	fields := []zapcore.Field{
		zap.Int("bytes_read", 198), zap.String("user_id", ""), zap.Duration("duration", 977499*time.Nanosecond),
		zap.Int("size", 556), zap.Int("status", 200),
		zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: resp}),
		zap.Object("llm", llm),
	}
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			logger := zap.New(zapcore.NewCore(e.enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel)).Named("http.log.access.log0")
			b.ReportAllocs()
			for b.Loop() {
				logger.WithLazy(request).Info("handled request", fields...)
			}
		})
	}
}
