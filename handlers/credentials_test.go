package handlers

import (
	"context"
	"net/http"
	"testing"
)

type recordRT struct{ got http.Header }

func (r *recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req.Header
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestCredentialsRestoredOnlyOnTheWire(t *testing.T) {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"X-Api-Key":            {"k1"},
		"Api-Key":              {"k2"},
		"X-Goog-Api-Key":       {"k3"},
		"X-Amz-Security-Token": {"k4"},
		"Authorization":        {"Bearer k5"},
		"Anthropic-Version":    {"2023-06-01"},
	}
	ctx := withCredentials(context.Background(), h)
	if len(h) != 2 || h.Get("Content-Type") == "" || h.Get("Anthropic-Version") == "" {
		t.Fatalf("credentials left on the logged request: %v", h)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://127.0.0.1/", nil)
	req.Header = h
	rec := &recordRT{}
	if _, err := (credTransport{next: rec}).RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token", "Authorization", "Content-Type"} {
		if rec.got.Get(k) == "" {
			t.Errorf("%s missing on the wire", k)
		}
	}
	if len(req.Header) != 2 {
		t.Fatalf("the proxy's request gained credentials: %v", req.Header)
	}
}

func TestForwardedHeadersNotSent(t *testing.T) {
	for _, withCreds := range []bool{true, false} {
		h := http.Header{
			"Content-Type":      {"application/json"},
			"X-Forwarded-For":   {"203.0.113.9"},
			"X-Forwarded-Host":  {"gw.example"},
			"X-Forwarded-Proto": {"https"},
		}
		if withCreds {
			h["Authorization"] = []string{"Bearer k"}
		}
		ctx := withCredentials(context.Background(), h)
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://127.0.0.1/", nil)
		req.Header = h
		rec := &recordRT{}
		if _, err := (credTransport{next: rec}).RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		for k := range rec.got {
			if isForwardedHeader(k) {
				t.Errorf("creds=%v: %s sent to the provider", withCreds, k)
			}
		}
		if rec.got.Get("Content-Type") == "" || withCreds && rec.got.Get("Authorization") == "" {
			t.Errorf("creds=%v: headers lost: %v", withCreds, rec.got)
		}
		if h.Get("X-Forwarded-For") == "" {
			t.Errorf("creds=%v: the proxy's own request was changed", withCreds)
		}
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
