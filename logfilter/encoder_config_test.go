package logfilter

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestEncoderUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name, in string
		wrap     string // the wrapped encoder's JSON, "" for none
		headers  []string
		wantErr  string
	}{
		{name: "bare", in: "llm_secrets"},
		{name: "empty block", in: "llm_secrets {\n}"},
		{name: "wrap json", in: "llm_secrets {\n wrap json\n}", wrap: `{"format":"json"}`},
		{name: "wrap with options", in: "llm_secrets {\n wrap json {\n  time_format unix_seconds_float\n }\n}", wrap: `{"format":"json","time_format":"unix_seconds_float"}`},
		{name: "wrap console", in: "llm_secrets {\n wrap console\n}", wrap: `{"format":"console"}`},
		{name: "headers", in: "llm_secrets {\n headers X-A x-b\n headers X-C\n}", headers: []string{"X-A", "x-b", "X-C"}},
		{name: "both", in: "llm_secrets {\n headers X-Pin\n wrap json\n}", wrap: `{"format":"json"}`, headers: []string{"X-Pin"}},
		{name: "argument", in: "llm_secrets json", wantErr: "wrong argument count"},
		{name: "wrap without encoder", in: "llm_secrets {\n wrap\n}", wantErr: "wrong argument count"},
		{name: "wrap twice", in: "llm_secrets {\n wrap json\n wrap json\n}", wantErr: "wrap given twice"},
		{name: "unknown encoder", in: "llm_secrets {\n wrap nosuch\n}", wantErr: "nosuch"},
		{name: "headers without names", in: "llm_secrets {\n headers\n}", wantErr: "wrong argument count"},
		{name: "unknown subdirective", in: "llm_secrets {\n fields {\n }\n}", wantErr: "unknown llm_secrets subdirective"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Encoder
			err := e.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(e.WrappedRaw) != tt.wrap {
				t.Errorf("wrap %s, want %s", e.WrappedRaw, tt.wrap)
			}
			if strings.Join(e.Headers, ",") != strings.Join(tt.headers, ",") {
				t.Errorf("headers %v, want %v", e.Headers, tt.headers)
			}
		})
	}
}

// TestEncoderProvision loads the encoder from its JSON config as Caddy
// does, wrapping each kind of encoder, and checks that the line is
// masked and written by the wrapped encoder.
func TestEncoderProvision(t *testing.T) {
	tests := []struct {
		name, config string
		check        func(line string) bool // the wrapped encoder wrote it
	}{
		{"default json", `{}`, func(l string) bool { return strings.HasPrefix(l, "{") }},
		{"json", `{"wrap":{"format":"json","message_key":"message"}}`, func(l string) bool { return strings.Contains(l, `"message":"handled request"`) }},
		{"console", `{"wrap":{"format":"console"}}`, func(l string) bool { return strings.Contains(l, "\thandled request\t") }},
		{"filter", `{"wrap":{"format":"filter","wrap":{"format":"json"},"fields":{"user_id":{"filter":"delete"}}}}`,
			func(l string) bool { return strings.HasPrefix(l, "{") && !strings.Contains(l, "user_id") }},
		{"extra headers", `{"headers":["X-Pin"]}`, func(l string) bool { return !strings.Contains(l, "4242") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Encoder
			if err := json.Unmarshal([]byte(tt.config), &e); err != nil {
				t.Fatal(err)
			}
			newEncoder(t, &e)
			h := http.Header{"X-Api-Key": {"k-secret"}, "X-Pin": {"4242"}}
			line := logLine(t, &e, []zapcore.Field{zap.Object("request", loggableRequest(h))},
				[]zapcore.Field{zap.String("user_id", "u"), zap.Object("resp_headers", loggableHeader(h))})
			if strings.Contains(line, "k-secret") || strings.Count(line, Redacted) < 2 {
				t.Errorf("not masked: %s", line)
			}
			if !tt.check(line) {
				t.Errorf("not written by the wrapped encoder: %s", line)
			}
		})
	}
}

// TestModulesRegistered: the encoder and the field filter share the name
// llm_secrets in their own namespaces.
func TestModulesRegistered(t *testing.T) {
	for _, id := range []string{"caddy.logging.encoders.llm_secrets", "caddy.logging.encoders.filter.llm_secrets"} {
		if _, err := caddy.GetModule(id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}
