package logfilter

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// encode logs h as Caddy's access log does (an object of string arrays),
// through the filter, and returns the JSON line.
func encode(t *testing.T, s *Secrets, field zapcore.Field) string {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	buf, err := enc.EncodeEntry(zapcore.Entry{Message: "handled request"}, []zapcore.Field{s.Filter(field)})
	if err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// headerCases are every credential header class, each with a value
// that must not be logged, and headers (or values) that must be logged as
// they are.
var headerCases = []struct {
	header, value string
	masked        bool
}{
	{"Authorization", "Bearer sk-auth-secret", true},
	{"Proxy-Authorization", "Basic cHJveHk6c2VjcmV0", true},
	{"Cookie", "session=cookie-secret", true},
	{"X-Gateway-Api-Key", "gw-secret-1", true},
	{"X-Portkey-Api-Key", "gw-secret-2", true},
	{"X-Api-Key", "anthropic-secret", true},
	{"Api-Key", "azure-secret", true},
	{"X-Goog-Api-Key", "google-secret", true},
	{"X-Amz-Security-Token", "amz-token-secret", true},
	{"X-Gateway-Clouda-Access-Key-Id", "AKIAGATEWAY", true},
	{"X-Portkey-Clouda-Access-Key-Id", "AKIAPORTKEY", true},
	{"X-Gateway-Clouda-Secret-Access-Key", "clouda-secret-1", true},
	{"X-Portkey-Clouda-Secret-Access-Key", "clouda-secret-2", true},
	{"X-Gateway-Clouda-Session-Token", "clouda-session-1", true},
	{"X-Portkey-Clouda-Session-Token", "clouda-session-2", true},
	{"X-Gateway-Config", `{"provider":"openai","api_key":"sk-config-secret"}`, true},
	{"X-Portkey-Config", `{"provider":"openai","api_key":"sk-config-secret-2"}`, true},
	{"X-Gateway-Custom-Host", "https://user:host-secret@example.com/v1", true},
	{"X-My-Service-Token", "extra-token-secret", true},
	// Kept: harmless and useful in an access log.
	{"X-Gateway-Config", "pc-saved-config", false},
	{"X-Portkey-Config", "pc-saved-config-2", false},
	{"X-Gateway-Custom-Host", "http://127.0.0.1:11434", false},
	{"X-Gateway-Provider", "openai", false},
	{"X-Gateway-Virtual-Key", "openai-prod", false},
	{"X-Gateway-Trace-Id", "trace-123", false},
	{"Content-Type", "application/json", false},
	{"User-Agent", "OpenAI/Go 3.0", false},
}

// logged reports whether value appears in the JSON line out, as JSON
// writes it (an inline config's quotes are escaped).
func logged(out, value string) bool {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(value)
	return strings.Contains(out, strings.Trim(strings.TrimSpace(b.String()), `"`))
}

func TestFilterMasksCredentialHeaders(t *testing.T) {
	s := &Secrets{}
	s.index()
	for _, tt := range headerCases {
		t.Run(tt.header+"="+tt.value, func(t *testing.T) {
			h := http.Header{tt.header: {tt.value}}
			for name, field := range map[string]zapcore.Field{
				"object":    zap.Object("headers", caddyhttp.LoggableHTTPHeader{Header: h, ShouldLogCredentials: true}),
				"reflected": zap.Any("headers", h),
			} {
				out := encode(t, s, field)
				if got := logged(out, tt.value); got == tt.masked {
					t.Errorf("%s: value present=%v, want masked=%v: %s", name, got, tt.masked, out)
				}
				if tt.masked && !strings.Contains(out, Redacted) {
					t.Errorf("%s: no %s marker: %s", name, Redacted, out)
				}
			}
		})
	}
}

func TestFilterExtraHeaders(t *testing.T) {
	s := &Secrets{Headers: []string{"X-Tenant-Pin"}}
	s.index()
	out := encode(t, s, zap.Object("headers", caddyhttp.LoggableHTTPHeader{Header: http.Header{"X-Tenant-Pin": {"4242-pin"}}}))
	if strings.Contains(out, "4242-pin") {
		t.Fatalf("extra header logged: %s", out)
	}
}

func TestFilterLeavesOtherFields(t *testing.T) {
	s := &Secrets{}
	s.index()
	out := encode(t, s, zap.String("uri", "/v1/chat/completions"))
	if !strings.Contains(out, "/v1/chat/completions") {
		t.Fatalf("string field changed: %s", out)
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		in      string
		headers []string
		wantErr bool
	}{
		{in: "llm_secrets", headers: nil},
		{in: "llm_secrets X-A x-b", headers: []string{"X-A", "x-b"}},
		{in: "llm_secrets {\n x\n}", wantErr: true},
	}
	for _, tt := range tests {
		var s Secrets
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
		if (err != nil) != tt.wantErr {
			t.Fatalf("%q: err %v", tt.in, err)
		}
		if !tt.wantErr && strings.Join(s.Headers, ",") != strings.Join(tt.headers, ",") {
			t.Fatalf("%q: headers %v", tt.in, s.Headers)
		}
	}
}

// TestClassesBounded: header names are remembered up to maxClassified,
// so a client sending random names cannot grow the filter's memory, and a
// remembered name keeps its class.
func TestClassesBounded(t *testing.T) {
	s := &Secrets{}
	s.index()
	for i := 0; i < 3*maxClassified; i++ {
		s.classOf("X-Random-" + strconv.Itoa(i))
	}
	if n := len(*s.classes.Load()); n != maxClassified {
		t.Fatalf("%d names remembered, want %d", n, maxClassified)
	}
	if s.classOf("X-Random-1") != classPlain || s.classOf("X-Gateway-Api-Key") != classSecret || s.classOf("X-Portkey-Config") != classConfig {
		t.Fatal("wrong class")
	}
}
