package logfilter

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// caddyContext is a Caddy context for provisioning modules in a test.
func caddyContext(t testing.TB) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// newEncoder provisions the llm_secrets encoder as Caddy does.
func newEncoder(t testing.TB, e *Encoder) *Encoder {
	t.Helper()
	if err := e.Provision(caddyContext(t)); err != nil {
		t.Fatal(err)
	}
	return e
}

// plainJSON is Caddy's json encoder, what the llm_secrets encoder wraps
// by default.
func plainJSON(t testing.TB) zapcore.Encoder {
	t.Helper()
	je := &logging.JSONEncoder{}
	if err := je.Provision(caddyContext(t)); err != nil {
		t.Fatal(err)
	}
	return je
}

// fixedClock stamps every entry with the same time, so lines from two
// encoders can be compared byte for byte.
type fixedClock struct{}

func (fixedClock) Now() time.Time                         { return time.Unix(1700000000, 0) }
func (fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// logLine logs one entry as Caddy's access log does: the request joins
// the logger through WithLazy (encoded into the core by With, through the
// encoder's Clone and AddObject), the rest are the entry's fields
// (through EncodeEntry).
func logLine(t testing.TB, enc zapcore.Encoder, with, fields []zapcore.Field) string {
	t.Helper()
	var buf bytes.Buffer
	core := zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel)
	zap.New(core, zap.WithClock(fixedClock{})).WithLazy(with...).Info("handled request", fields...)
	return buf.String()
}

// fieldsObj logs its fields as one object.
type fieldsObj []zapcore.Field

func (o fieldsObj) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, f := range o {
		f.AddTo(enc)
	}
	return nil
}

// objArray logs objects as an array.
type objArray []zapcore.ObjectMarshaler

func (a objArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, o := range a {
		if err := enc.AppendObject(o); err != nil {
			return err
		}
	}
	return nil
}

// arrArray logs arrays as an array.
type arrArray []zapcore.ArrayMarshaler

func (a arrArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, o := range a {
		if err := enc.AppendArray(o); err != nil {
			return err
		}
	}
	return nil
}

// loggableRequest is the request object Caddy logs, with h as headers.
func loggableRequest(h http.Header) caddyhttp.LoggableHTTPRequest {
	r, _ := http.NewRequest("POST", "http://127.0.0.1:8787/v1/chat/completions", nil)
	r.RemoteAddr = "127.0.0.1:50000"
	r.RequestURI = "/v1/chat/completions"
	r.Header = h
	// ShouldLogCredentials: Caddy's own masking of Authorization and
	// Cookie off, so the test sees the encoder's.
	return caddyhttp.LoggableHTTPRequest{Request: r, ShouldLogCredentials: true}
}

func loggableHeader(h http.Header) caddyhttp.LoggableHTTPHeader {
	return caddyhttp.LoggableHTTPHeader{Header: h, ShouldLogCredentials: true}
}

// placements put a header set where Caddy (or the gateway) logs one, and
// where one could be nested: (With fields, entry fields).
var placements = []struct {
	name         string
	with, fields func(http.Header) []zapcore.Field
}{
	{name: "access log request>headers (WithLazy)", with: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("request", loggableRequest(h))}
	}},
	{name: "access log resp_headers", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Int("status", 200), zap.Object("resp_headers", loggableHeader(h))}
	}},
	{name: "proxy DEBUG request>headers", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("request", loggableRequest(h))}
	}},
	{name: "proxy DEBUG headers", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("headers", loggableHeader(h)), zap.Int("status", 200)}
	}},
	{name: "resp_headers via With", with: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("resp_headers", loggableHeader(h))}
	}},
	{name: "depth 3 a>request>headers", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("a", fieldsObj{zap.Object("request", loggableRequest(h))})}
	}},
	{name: "depth 3 via With", with: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("a", fieldsObj{zap.Object("request", loggableRequest(h))})}
	}},
	{name: "depth 4 a>b>request>headers", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("a", fieldsObj{zap.Object("b", fieldsObj{zap.Object("request", loggableRequest(h))})})}
	}},
	{name: "dict", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Dict("upstream", zap.Object("headers", loggableHeader(h)))}
	}},
	{name: "array of objects", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Array("attempts", objArray{fieldsObj{zap.String("x", "y")}, fieldsObj{zap.Object("request", loggableRequest(h))}})}
	}},
	{name: "array of objects via With", with: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Array("attempts", objArray{fieldsObj{zap.Object("resp_headers", loggableHeader(h))}})}
	}},
	{name: "zap.Objects", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Objects("requests", []caddyhttp.LoggableHTTPRequest{loggableRequest(h)})}
	}},
	{name: "array in array in object", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("o", fieldsObj{zap.Array("aa", arrArray{objArray{fieldsObj{zap.Object("headers", loggableHeader(h))}}})})}
	}},
	{name: "array of header objects", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Array("headers", objArray{loggableHeader(h)})}
	}},
	{name: "inline", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Inline(fieldsObj{zap.Object("resp_headers", loggableHeader(h))})}
	}},
	{name: "inline via With", with: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Inline(fieldsObj{zap.Object("request", loggableRequest(h))})}
	}},
	{name: "reflected http.Header", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Any("headers", h)}
	}},
	{name: "reflected http.Header nested", fields: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Object("upstream", fieldsObj{zap.Any("headers", h)})}
	}},
	{name: "reflected http.Header via With", with: func(h http.Header) []zapcore.Field {
		return []zapcore.Field{zap.Any("push_headers", h)}
	}},
}

// TestEncoderMasksCredentialHeaders logs every credential header class
// (and harmless ones) in every placement a header object has or could
// have: masked values must be gone and marked, the others logged.
func TestEncoderMasksCredentialHeaders(t *testing.T) {
	enc := newEncoder(t, &Encoder{})
	for _, tt := range headerCases {
		t.Run(tt.header+"="+tt.value, func(t *testing.T) {
			for _, p := range placements {
				h := http.Header{tt.header: {tt.value}}
				var with, fields []zapcore.Field
				if p.with != nil {
					with = p.with(h)
				}
				if p.fields != nil {
					fields = p.fields(h)
				}
				out := logLine(t, enc, with, fields)
				if got := logged(out, tt.value); got == tt.masked {
					t.Errorf("%s: value present=%v, want masked=%v: %s", p.name, got, tt.masked, out)
				}
				if tt.masked && !strings.Contains(out, Redacted) {
					t.Errorf("%s: no %s marker: %s", p.name, Redacted, out)
				}
			}
		})
	}
}

// TestEncoderExtraHeaders: names listed in Headers are masked too, in
// any case.
func TestEncoderExtraHeaders(t *testing.T) {
	enc := newEncoder(t, &Encoder{Headers: []string{"x-tenant-pin"}})
	h := http.Header{"X-Tenant-Pin": {"4242-pin"}, "X-Tenant-Name": {"acme"}}
	out := logLine(t, enc, []zapcore.Field{zap.Object("request", loggableRequest(h))}, []zapcore.Field{zap.Object("resp_headers", loggableHeader(h))})
	if strings.Contains(out, "4242-pin") || strings.Count(out, `"X-Tenant-Pin":["REDACTED"]`) != 2 {
		t.Fatalf("extra header not masked in both objects: %s", out)
	}
	if strings.Count(out, `"acme"`) != 2 {
		t.Fatalf("unlisted header masked: %s", out)
	}
}

// sortedHeader logs a header object as Caddy does (a string array per
// name) in name order, so two lines can be compared byte for byte.
type sortedHeader http.Header

func (h sortedHeader) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		if err := enc.AddArray(k, caddyhttp.LoggableStringArray(h[k])); err != nil {
			return err
		}
	}
	return nil
}

// accessEntry builds a realistic access log entry (the request's
// headers req, the response's resp) as (With fields, entry fields), with
// every kind of field zap has around them.
func accessEntry(req, resp http.Header) (with, fields []zapcore.Field) {
	request := fieldsObj{
		zap.String("remote_ip", "127.0.0.1"), zap.String("remote_port", "50000"),
		zap.String("proto", "HTTP/1.1"), zap.String("method", "POST"), zap.String("host", "127.0.0.1:8787"),
		zap.String("uri", "/v1/chat/completions?x=1&y=<2>"),
		zap.Object("headers", sortedHeader(req)),
		zap.Array("transfer_encoding", caddyhttp.LoggableStringArray{"chunked"}),
		zap.Object("tls", fieldsObj{zap.Bool("resumed", false), zap.Uint16("version", 772)}),
	}
	llm := fieldsObj{
		zap.String("trace_id", "trace-1"), zap.String("api_key_name", "default"), zap.String("workspace_id", "ws"),
		zap.String("endpoint", "chat.completions"), zap.String("method", "POST"), zap.String("path", "/v1/chat/completions"),
		zap.String("provider", "openai"), zap.String("model", "gpt-4o-mini"), zap.Int("status", 200),
		zap.Bool("stream", false), zap.Float64("duration_ms", 12.5), zap.Float64("ttfb_ms", 3.25),
		zap.String("virtual_key", "openai"), zap.String("config_id", "pc-1"), zap.String("cache_status", "MISS"),
		zap.Object("usage", fieldsObj{zap.Int64("prompt_tokens", 10), zap.Int64("completion_tokens", 20), zap.Int64("total_tokens", 30)}),
		zap.Float64("cost_usd", 0.00012),
		zap.Object("metadata", fieldsObj{zap.String("user", "u1")}),
		zap.Array("attempts", objArray{
			fieldsObj{zap.String("target", "0"), zap.String("provider", "openai"), zap.Int("status", 429), zap.String("outcome", "retry")},
			fieldsObj{zap.String("target", "1"), zap.String("provider", "openai"), zap.Int("status", 200), zap.String("outcome", "ok")},
		}),
		zap.String("error", ""),
	}
	with = []zapcore.Field{zap.Object("request", request)}
	fields = []zapcore.Field{
		zap.Int("bytes_read", 64), zap.String("user_id", ""), zap.Duration("duration", 12*time.Millisecond),
		zap.Int("size", 512), zap.Int("status", 200),
		zap.Object("resp_headers", sortedHeader(resp)),
		zap.Object("llm", llm),
		zap.Strings("strings", []string{"a", "b"}), zap.Any("reflected", map[string]int{"n": 1}),
		zap.Binary("bin", []byte{1, 2, 3}), zap.ByteString("bytes", []byte("x\"y")), zap.Time("at", time.Unix(1, 0)),
		zap.Stringer("stringer", time.Second), zap.NamedError("write_error", context.Canceled),
		zap.Inline(fieldsObj{zap.String("inlined", "yes")}),
		zap.Namespace("ns"), zap.String("in_ns", "v"),
	}
	return with, fields
}

// TestEncoderOutputMatchesJSON: a realistic access log line through the
// encoder is byte for byte the plain json line of the same entry with the
// credential values replaced by REDACTED: every other field, header and
// value unchanged, nothing added, nothing reordered.
func TestEncoderOutputMatchesJSON(t *testing.T) {
	reqH := http.Header{
		"Authorization": {"Bearer sk-secret"}, "X-Gateway-Api-Key": {"gw-secret"}, "Content-Type": {"application/json"},
		"User-Agent": {"OpenAI/Go 3.0"}, "X-Gateway-Config": {"pc-saved"}, "Accept": {"application/json", "text/event-stream"},
		"X-Portkey-Config": {`{"api_key":"inline-secret"}`}, "X-Gateway-Trace-Id": {"trace-1"},
	}
	respH := http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"s=secret-cookie"}, "X-Request-Id": {"req-1"}}
	masked := func(h http.Header) http.Header {
		out := http.Header{}
		for k, v := range h {
			out[k] = v
		}
		for _, k := range []string{"Authorization", "X-Gateway-Api-Key", "X-Portkey-Config", "Set-Cookie"} {
			if _, ok := out[k]; ok {
				out[k] = []string{Redacted}
			}
		}
		return out
	}
	with, fields := accessEntry(reqH, respH)
	got := logLine(t, newEncoder(t, &Encoder{}), with, fields)
	with, fields = accessEntry(masked(reqH), masked(respH))
	want := logLine(t, plainJSON(t), with, fields)
	if got != want {
		t.Fatalf("lines differ\n got: %s\nwant: %s", got, want)
	}
	// Without credentials the two encoders agree exactly.
	with, fields = accessEntry(http.Header{"Accept": {"*/*"}}, http.Header{"Server": {"Caddy"}})
	if got, want := logLine(t, newEncoder(t, &Encoder{}), with, fields), logLine(t, plainJSON(t), with, fields); got != want {
		t.Fatalf("lines differ\n got: %s\nwant: %s", got, want)
	}
}

// ptrObj is a comparable marshaler, to see whether a field was replaced.
type ptrObj struct{ h http.Header }

func (p *ptrObj) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return loggableHeader(p.h).MarshalLogObject(enc)
}

// TestEncoderLeavesCallerFields: EncodeEntry wraps a copy of the fields;
// the caller's slice (which a tee hands to other cores) is unchanged.
func TestEncoderLeavesCallerFields(t *testing.T) {
	enc := newEncoder(t, &Encoder{})
	obj := &ptrObj{http.Header{"X-Api-Key": {"k-secret"}}}
	fields := []zapcore.Field{zap.Object("headers", obj), zap.Array("push_headers", objArray{obj})}
	buf, err := enc.EncodeEntry(zapcore.Entry{Message: "m"}, fields)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "k-secret") {
		t.Fatalf("not masked: %s", buf)
	}
	buf.Free()
	if fields[0].Interface != zapcore.ObjectMarshaler(obj) {
		t.Fatalf("caller's object field replaced by %T", fields[0].Interface)
	}
	if _, ok := fields[1].Interface.(objArray); !ok {
		t.Fatalf("caller's array field replaced by %T", fields[1].Interface)
	}
}

// TestEncoderAllocations: neither scalar fields nor the objects and
// arrays the encoder wraps cost it an allocation over plain json.
func TestEncoderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	enc := newEncoder(t, &Encoder{})
	plain := plainJSON(t)
	allocs := func(e zapcore.Encoder, fields []zapcore.Field) float64 {
		return testing.AllocsPerRun(200, func() {
			buf, err := e.EncodeEntry(zapcore.Entry{Message: "m"}, fields)
			if err != nil {
				t.Fatal(err)
			}
			buf.Free()
		})
	}
	scalars := []zapcore.Field{zap.String("a", "b"), zap.Int("n", 1), zap.Bool("ok", true), zap.Float64("f", 1.5), zap.Duration("d", time.Second)}
	if got, want := allocs(enc, scalars), allocs(plain, scalars); got != want {
		t.Errorf("scalars: %v allocations, plain json %v", got, want)
	}
	// Four wrapped (llm, usage, attempts and its one element), by nodes
	// from a pooled walker.
	objects := append(slices.Clone(scalars), zap.Object("llm", fieldsObj{
		zap.String("model", "m"), zap.Object("usage", fieldsObj{zap.Int("t", 1)}),
		zap.Array("attempts", objArray{fieldsObj{zap.Int("status", 200)}}),
	}))
	if got, want := allocs(enc, objects), allocs(plain, objects); got > want {
		t.Errorf("objects: %v allocations, plain json %v", got, want)
	}
}

// TestEncoderConcurrent logs through one encoder from several goroutines,
// as Caddy's servers do; run with -race it checks that the masking nodes
// and the field copies are never shared between entries.
func TestEncoderConcurrent(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	core := zapcore.NewCore(newEncoder(t, &Encoder{}), zapcore.AddSync(lockedWriter{&mu, &buf}), zapcore.DebugLevel)
	logger := zap.New(core)
	h := http.Header{"X-Api-Key": {"k-secret"}, "Accept": {"*/*"}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				with, fields := accessEntry(h, h)
				logger.WithLazy(with...).Info("handled request", fields...)
			}
		})
	}
	wg.Wait()
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 200 {
		t.Fatalf("%d lines, want 200", n)
	}
	if strings.Contains(out, "k-secret") || strings.Count(out, `"X-Api-Key":["REDACTED"]`) != 400 {
		t.Fatal("a line is not masked")
	}
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
