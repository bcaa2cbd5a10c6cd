package handlers

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

func TestAttemptErrorType(t *testing.T) {
	tests := []struct {
		name string
		out  routing.Outcome
		want string
	}{
		{"success", routing.Outcome{Status: 200}, ""},
		{"provider error", routing.Outcome{Status: 429}, "429"},
		{"gateway timeout", routing.Outcome{Status: 408, Cause: routing.CauseTimeout}, "timeout"},
		{"unreachable", routing.Outcome{Status: 502, Cause: routing.CauseUnreachable}, "unreachable"},
		{"client gone", routing.Outcome{Status: StatusClientClosed, Cause: routing.CauseClientGone}, "canceled"},
		{"stream broke", routing.Outcome{Status: 200, Cause: routing.CauseStreamFailed}, "stream_failed"},
		{"nothing", routing.Outcome{}, "_OTHER"},
	}
	for _, tt := range tests {
		if got := attemptErrorType(tt.out); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
