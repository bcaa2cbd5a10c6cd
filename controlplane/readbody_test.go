package controlplane

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestReadBody: the one body reader refuses a declared or undeclared
// size over its limit with 413 request_too_large naming the bound
// (a limit in front of the gateway named as its own), answers 400 for a
// body that breaks off, and returns any other body whole.
func TestReadBody(t *testing.T) {
	big := strings.Repeat("x", 11)
	for _, tc := range []struct {
		name    string
		body    io.Reader
		length  int64 // -1: undeclared
		limit   int64
		front   int64 // a MaxBytesReader in front (Caddy's request_body)
		want    string
		status  int
		message string
	}{
		{name: "declared", body: strings.NewReader("hello"), length: 5, limit: 10, want: "hello"},
		{name: "undeclared", body: strings.NewReader("hello"), length: -1, limit: 10, want: "hello"},
		{name: "empty", body: http.NoBody, limit: 10},
		{name: "declared over", body: strings.NewReader(big), length: 11, limit: 10, status: 413, message: "limit of 10 bytes"},
		{name: "undeclared over", body: strings.NewReader(big), length: -1, limit: 10, status: 413, message: "limit of 10 bytes"},
		{name: "a limit in front", body: strings.NewReader(big), length: 11, limit: 100, front: 4, status: 413, message: "limit of 4 bytes"},
		{name: "broken off", body: failingReader{}, length: -1, limit: 10, status: 400},
		{name: "default bound", body: strings.NewReader(strings.Repeat("x", MaxBody+1)), length: MaxBody + 1, status: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/api-keys", tc.body)
			r.ContentLength = tc.length
			w := httptest.NewRecorder()
			if tc.front > 0 {
				r.Body = http.MaxBytesReader(w, r.Body, tc.front)
			}
			got, err := ReadBody(w, r, tc.limit)
			var e *apierror.Error
			switch {
			case tc.status == 0 && (err != nil || string(got) != tc.want):
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			case tc.status != 0 && (!errors.As(err, &e) || e.Status != tc.status || !strings.Contains(e.Message, tc.message)):
				t.Fatalf("error %v; want %d with %q", err, tc.status, tc.message)
			case tc.status == 413 && e.Code != "request_too_large":
				t.Fatalf("code %v", e.Code)
			}
		})
	}
}
