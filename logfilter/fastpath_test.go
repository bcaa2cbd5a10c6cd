package logfilter

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// commonNames are the names commonClass knows.
var commonNames = []string{
	"Accept", "Accept-Encoding", "Cache-Control", "Connection", "Content-Encoding", "Content-Length",
	"Content-Type", "Date", "Server", "Transfer-Encoding", "User-Agent", "Vary", "Via",
	"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id",
	"X-Gateway-Cache-Status", "X-Gateway-Cost", "X-Gateway-Last-Used-Option-Index",
	"X-Gateway-Provider", "X-Gateway-Retry-Attempt-Count", "X-Gateway-Trace-Id",
	"Authorization", "Cookie", "Proxy-Authorization", "Set-Cookie", "X-Api-Key",
	"X-Gateway-Api-Key", "X-Portkey-Api-Key",
	"X-Gateway-Config", "X-Portkey-Config",
	"X-Gateway-Custom-Host", "X-Portkey-Custom-Host",
}

// TestCommonClass: the shortcut for common names gives the class
// classify gives, and stands aside when extra names are configured.
func TestCommonClass(t *testing.T) {
	s := &Secrets{}
	s.index()
	for _, n := range commonNames {
		if got, want := commonClass(n), s.classify(n); got != want {
			t.Errorf("%s: commonClass %d, classify %d", n, got, want)
		}
	}
	for _, n := range []string{"content-type", "X-Gateway-Virtual-Key", "X-Stainless-Lang", ""} {
		if c := commonClass(n); c != 0 {
			t.Errorf("%q: commonClass %d, want 0", n, c)
		}
	}
	extra := &Secrets{Headers: []string{"content-type", "X-Gateway-Config"}}
	extra.index()
	if extra.classOf("Content-Type") != classSecret || extra.classOf("X-Gateway-Config") != classSecret {
		t.Fatal("an extra header name is not masked")
	}
}

// opaque hides a marshaler's type, so the encoder masks what it writes
// (the general path) instead of writing Caddy's header object itself.
type opaque struct{ zapcore.ObjectMarshaler }

// TestCaddyHeaderDirect: Caddy's header object written by the encoder
// itself is what Caddy's own marshaler writes, masked: for every header
// class, with and without Caddy's own credential hiding, through the
// encoder and through the field filter.
func TestCaddyHeaderDirect(t *testing.T) {
	h := http.Header{"Accept": {"application/json", "text/event-stream"}, "Set-Cookie": {"a=1", "b=2"}, "Proxy-Authorization": {"Basic eA=="}, "X-Empty": {}}
	for _, tt := range headerCases {
		h[tt.header] = append(h[tt.header], tt.value)
	}
	enc := newEncoder(t, &Encoder{})
	for _, creds := range []bool{false, true} {
		caddy := caddyhttp.LoggableHTTPHeader{Header: h, ShouldLogCredentials: creds}
		general := parseLine(t, logLine(t, enc, nil, []zapcore.Field{zap.Object("resp_headers", opaque{caddy})}))
		direct := parseLine(t, logLine(t, enc, nil, []zapcore.Field{zap.Object("resp_headers", caddy)}))
		if !maps.EqualFunc(general, direct, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
			t.Errorf("ShouldLogCredentials=%v:\ngeneral: %v\n direct: %v", creds, general, direct)
		}
		headers, _ := direct["resp_headers"].(map[string]any)
		if len(headers) != len(h) {
			t.Errorf("ShouldLogCredentials=%v: %d headers logged, want %d", creds, len(headers), len(h))
		}
		for _, name := range []string{"Set-Cookie", "Proxy-Authorization", "Authorization", "Cookie", "X-Gateway-Api-Key"} {
			if got := fmt.Sprint(headers[name]); got != "[REDACTED]" {
				t.Errorf("ShouldLogCredentials=%v: %s logged as %s", creds, name, got)
			}
		}
		s := &Secrets{}
		s.index()
		filtered := parseLine(t, encode(t, s, zap.Object("resp_headers", caddy)))
		if got, want := fmt.Sprint(filtered["resp_headers"]), fmt.Sprint(direct["resp_headers"]); got != want {
			t.Errorf("field filter: %s\nencoder: %s", got, want)
		}
	}
}

// parseLine decodes a JSON log line.
func parseLine(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return m
}

// TestEncoderBeyondSlabs: objects nested deeper, and arrays wider, than
// a walker's slabs hold are masked and logged as plain json logs them.
func TestEncoderBeyondSlabs(t *testing.T) {
	secret := http.Header{"X-Api-Key": {"k-secret"}, "Accept": {"*/*"}}
	masked := http.Header{"X-Api-Key": {Redacted}, "Accept": {"*/*"}}
	entry := func(h http.Header) []zapcore.Field {
		var deep zapcore.ObjectMarshaler = fieldsObj{zap.Object("headers", sortedHeader(h))}
		for i := range 3 * slabSize {
			deep = fieldsObj{zap.Int("depth", i), zap.Object(fmt.Sprintf("o%d", i), deep)}
		}
		var wide objArray
		for range 3 * slabSize {
			wide = append(wide, fieldsObj{zap.Object("resp_headers", sortedHeader(h)), zap.Array("a", objArray{fieldsObj{zap.Object("headers", sortedHeader(h))}})})
		}
		var fields []zapcore.Field
		for i := range 3 * slabSize {
			fields = append(fields, zap.Object(fmt.Sprintf("f%d", i), deep), zap.Array(fmt.Sprintf("w%d", i), wide))
		}
		return fields
	}
	enc := newEncoder(t, &Encoder{})
	got := logLine(t, enc, entry(secret), entry(secret))
	want := logLine(t, plainJSON(t), entry(masked), entry(masked))
	if got != want {
		t.Fatalf("lines differ\n got: %s\nwant: %s", got, want)
	}
	if n := strings.Count(got, `"X-Api-Key":["REDACTED"]`); n != 2*3*slabSize*(1+2*3*slabSize) {
		t.Fatalf("%d headers masked", n)
	}
}

// TestCaddyHeaderAllocations: Caddy's header objects cost the encoder
// fewer allocations than plain json spends on them.
func TestCaddyHeaderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	h := http.Header{}
	for _, n := range slices.Sorted(maps.Keys(map[string]bool{"Accept": true, "Content-Type": true, "User-Agent": true, "Date": true})) {
		h[n] = []string{"v"}
	}
	fields := []zapcore.Field{zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: h})}
	allocs := func(e zapcore.Encoder) float64 {
		return testing.AllocsPerRun(200, func() {
			buf, err := e.EncodeEntry(zapcore.Entry{Message: "m"}, fields)
			if err != nil {
				t.Fatal(err)
			}
			buf.Free()
		})
	}
	got, plain := allocs(newEncoder(t, &Encoder{})), allocs(plainJSON(t))
	if got+float64(len(h)) > plain {
		t.Fatalf("%v allocations, plain json %v: want at least one a header fewer", got, plain)
	}
}

// TestCaddyHeaderThroughFilter: wrapping Caddy's `filter` encoder, the
// header values still reach its field filters as Caddy's string arrays,
// so a hash or regexp filter on a header applies as it does without this
// encoder; masked headers stay masked.
func TestCaddyHeaderThroughFilter(t *testing.T) {
	filter := `{"format":"filter","wrap":{"format":"json"},"fields":{` +
		`"resp_headers>X-Client":{"filter":"hash"},` +
		`"request>headers>User-Agent":{"filter":"regexp","regexp":"Go","value":"GO"},` +
		`"request>headers>X-Gateway-Config":{"filter":"hash"}}}`
	enc := newEncoder(t, &Encoder{WrappedRaw: json.RawMessage(filter)})
	plain := &logging.FilterEncoder{}
	if err := json.Unmarshal([]byte(filter), plain); err != nil {
		t.Fatal(err)
	}
	if err := plain.Provision(caddyContext(t)); err != nil {
		t.Fatal(err)
	}
	req := http.Header{"User-Agent": {"OpenAI/Go 3.0"}, "Accept": {"*/*"}, "X-Gateway-Config": {"pc-saved"}}
	resp := http.Header{"X-Client": {"client-7"}, "Server": {"Caddy"}}
	with := []zapcore.Field{zap.Object("request", loggableRequest(req))}
	fields := []zapcore.Field{zap.Object("resp_headers", loggableHeader(resp))}
	got := parseLine(t, logLine(t, enc, with, fields))
	want := parseLine(t, logLine(t, plain, with, fields))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("through llm_secrets: %v\n    filter alone: %v", got, want)
	}
	if line := fmt.Sprint(got); strings.Contains(line, "client-7") || strings.Contains(line, "OpenAI/Go") || strings.Contains(line, "pc-saved") {
		t.Fatalf("a field filter did not apply: %s", line)
	}
	req["X-Api-Key"] = []string{"k-secret"}
	if line := logLine(t, enc, []zapcore.Field{zap.Object("request", loggableRequest(req))}, fields); !strings.Contains(line, `"X-Api-Key":["REDACTED"]`) {
		t.Fatalf("not masked: %s", line)
	}
}
