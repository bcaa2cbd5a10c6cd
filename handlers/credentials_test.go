package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestMaskedHeaderHidesCredentials(t *testing.T) {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"X-Api-Key":            {"k1"},
		"Api-Key":              {"k2"},
		"X-Goog-Api-Key":       {"k3"},
		"X-Amz-Security-Token": {"k4"},
		"Authorization":        {"Bearer k5"},
		"Anthropic-Version":    {"2023-06-01"},
	}
	enc := zapcore.NewMapObjectEncoder()
	if err := maskedHeader(h).MarshalLogObject(enc); err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprint(enc.Fields)
	for _, secret := range []string{"k1", "k2", "k3", "k4", "k5"} {
		if strings.Contains(out, secret) {
			t.Errorf("credential %s logged: %s", secret, out)
		}
	}
	for _, kept := range []string{"application/json", "2023-06-01", "REDACTED"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%s missing from %s", kept, out)
		}
	}
	if len(enc.Fields) != len(h) {
		t.Errorf("logged %d headers, want %d", len(enc.Fields), len(h))
	}
}

func TestIsCredentialHeader(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"X-Api-Key", true},
		{"X-Amz-Security-Token", true},
		{"X-Custom-Auth-Header", true},
		{"X-My-Secret", true},
		{"X-Signature", true},
		{"Content-Type", false},
		{"Anthropic-Version", false},
		{"X-Amz-Content-Sha256", false},
		{"Traceparent", false},
		{"X-Request-Id", false},
	}
	for _, tt := range tests {
		if got := isCredentialHeader(tt.name); got != tt.want {
			t.Errorf("isCredentialHeader(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
