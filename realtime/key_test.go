package realtime

import (
	"net/http"
	"testing"
)

func TestTakeSubprotocolKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        http.Header
		protocols string
		gwKey     string
		beta      string
	}{
		{"browser form", http.Header{"Sec-Websocket-Protocol": {"realtime, openai-insecure-api-key.gw-1"}}, "realtime", "gw-1", ""},
		{"beta form", http.Header{"Sec-Websocket-Protocol": {"realtime, openai-insecure-api-key.gw-1, openai-beta.realtime-v1"}}, "realtime, openai-beta.realtime-v1", "gw-1", "realtime=v1"},
		{"separate header lines", http.Header{"Sec-Websocket-Protocol": {"realtime", "openai-insecure-api-key.gw-1"}}, "realtime", "gw-1", ""},
		{"gateway header wins, key still dropped", http.Header{"X-Gateway-Api-Key": {"gw-0"}, "Sec-Websocket-Protocol": {"openai-insecure-api-key.gw-1"}}, "", "gw-0", ""},
		{"no key", http.Header{"Sec-Websocket-Protocol": {"realtime"}}, "realtime", "", ""},
		{"nothing", http.Header{}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			TakeSubprotocolKey(tc.in)
			if got := tc.in.Get("Sec-Websocket-Protocol"); got != tc.protocols {
				t.Errorf("protocols %q, want %q", got, tc.protocols)
			}
			if got := tc.in.Get("X-Gateway-Api-Key"); got != tc.gwKey {
				t.Errorf("gateway key %q, want %q", got, tc.gwKey)
			}
			if got := tc.in.Get("Openai-Beta"); got != tc.beta {
				t.Errorf("OpenAI-Beta %q, want %q", got, tc.beta)
			}
			// A second call (the gateway after llm_ratelimit) changes nothing.
			before := tc.in.Clone()
			TakeSubprotocolKey(tc.in)
			if len(before) != len(tc.in) || before.Get("X-Gateway-Api-Key") != tc.in.Get("X-Gateway-Api-Key") {
				t.Errorf("second call changed %v to %v", before, tc.in)
			}
		})
	}
}

func TestIsUpgrade(t *testing.T) {
	for _, tc := range []struct {
		method string
		h      http.Header
		want   bool
	}{
		{http.MethodGet, http.Header{"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"}}, true},
		{http.MethodGet, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"WebSocket"}}, true},
		{http.MethodPost, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, false},
		{http.MethodGet, http.Header{"Upgrade": {"websocket"}}, false},
		{http.MethodGet, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"h2c"}}, false},
	} {
		r := &http.Request{Method: tc.method, Header: tc.h}
		if got := IsUpgrade(r); got != tc.want {
			t.Errorf("%s %v: %v", tc.method, tc.h, got)
		}
	}
}
