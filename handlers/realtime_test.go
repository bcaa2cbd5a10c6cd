package handlers

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRealtimeUpgrade(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		upgrade      bool
		want         bool
	}{
		{http.MethodGet, "/v1/realtime", true, true},
		{http.MethodGet, "/v1/realtime", false, false},
		{http.MethodGet, "/v1/realtime/client_secrets", true, false},
		{http.MethodPost, "/v1/realtime", true, false},
		{http.MethodGet, "/v1/responses", true, false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.upgrade {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
		}
		if got := realtimeUpgrade(r); got != tc.want {
			t.Errorf("%s %s upgrade=%v: %v", tc.method, tc.path, tc.upgrade, got)
		}
	}
}

// TestRefusalOf: the limit stage's HTTP refusal becomes the error
// event's type, code and message.
func TestRefusalOf(t *testing.T) {
	r := refusalOf(429, []byte(`{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`))
	if r.Code != "rate_limit_exceeded" || r.Type != "rate_limit_error" || r.Message != "slow down" || r.Status != 429 {
		t.Errorf("%+v", r)
	}
	r = refusalOf(503, []byte(`not json`))
	if r.Message == "" || r.Type == "" || r.Status != 503 {
		t.Errorf("%+v", r)
	}
}
