package providers

import "testing"

// TestClassifyFallback pins the shared last step of every classifier:
// wording first, then the status; "rate" in a 400's message is no rate
// limit.
func TestClassifyFallback(t *testing.T) {
	tests := []struct {
		status int
		msg    string
		want   ErrorClass
	}{
		{400, "This model's maximum context length is 4096 tokens", ErrContextLength},
		{413, "prompt is too long: 5 tokens > 4 maximum", ErrContextLength},
		{400, "Output blocked by content filtering policy", ErrContentPolicy},
		{429, "You exceeded your current quota, please check your plan and billing details.", ErrQuotaExhausted},
		{429, "slow down", ErrRateLimited},
		{400, "invalid rate_limit parameter", ErrInvalidRequest},
		{500, "the server is overloaded", ErrOverloaded},
		{503, "", ErrOverloaded},
		{529, "", ErrOverloaded},
		{402, "", ErrQuotaExhausted},
		{422, "unprocessable", ErrInvalidRequest},
		{401, "invalid key", ""},
		{404, "model not found", ""},
		{500, "internal error", ""},
	}
	for _, tt := range tests {
		if got := ClassifyFallback(tt.status, tt.msg); got != tt.want {
			t.Errorf("%d %q: %q, want %q", tt.status, tt.msg, got, tt.want)
		}
	}
}

// TestErrorClassRetryable: only the classes a later identical call can
// escape are retryable.
func TestErrorClassRetryable(t *testing.T) {
	tests := []struct {
		class ErrorClass
		want  bool
	}{
		{ErrRateLimited, true},
		{ErrOverloaded, true},
		{"", true},
		{ErrQuotaExhausted, false},
		{ErrContextLength, false},
		{ErrContentPolicy, false},
		{ErrInvalidRequest, false},
	}
	for _, tt := range tests {
		if got := tt.class.Retryable(); got != tt.want {
			t.Errorf("%q.Retryable() = %v, want %v", tt.class, got, tt.want)
		}
	}
}
