package logfilter

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkAccessLog logs one realistic access log entry per operation
// the way Caddy does (WithLazy of the request, then the entry with the
// response headers and the gateway's 20-key llm object) through
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
	r, _ := http.NewRequest("POST", "http://127.0.0.1:8787/v1/chat/completions", nil)
	r.RemoteAddr, r.RequestURI, r.Proto = "127.0.0.1:50412", "/v1/chat/completions", "HTTP/1.1"
	r.Header = http.Header{
		"Accept":                      {"application/json"},
		"Accept-Encoding":             {"gzip"},
		"Authorization":               {"Bearer sk-client-secret"},
		"Content-Length":              {"187"},
		"Content-Type":                {"application/json"},
		"User-Agent":                  {"OpenAI/Go 3.8.1"},
		"X-Gateway-Api-Key":           {"gw-secret"},
		"X-Gateway-Provider":          {"openai"},
		"X-Gateway-Trace-Id":          {"trace-8c1f"},
		"X-Stainless-Lang":            {"go"},
		"X-Stainless-Package-Version": {"3.8.1"},
		"X-Stainless-Retry-Count":     {"0"},
	}
	request := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r})
	resp := http.Header{
		"Content-Type": {"application/json"}, "Date": {"Mon, 01 Jan 2024 00:00:00 GMT"}, "Server": {"Caddy"},
		"X-Gateway-Trace-Id": {"trace-8c1f"}, "X-Gateway-Provider": {"openai"}, "X-Request-Id": {"req-1"},
	}
	_, fields := accessEntry(nil, nil)
	fields = fields[:7] // bytes_read … llm, as Caddy's logRequest writes them
	fields[5] = zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: resp})
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			logger := zap.New(zapcore.NewCore(e.enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel))
			b.ReportAllocs()
			for b.Loop() {
				logger.WithLazy(request).Info("handled request", fields...)
			}
		})
	}
}
