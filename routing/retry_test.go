package routing

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers []string
		want    time.Duration
		ok      bool
	}{
		{"none", nil, 0, false},
		{"retry-after-ms", []string{"retry-after-ms", "50"}, 50 * time.Millisecond, true},
		{"fractional ms", []string{"retry-after-ms", "1.5"}, 1500 * time.Microsecond, true},
		{"x-ms-retry-after-ms", []string{"x-ms-retry-after-ms", "250"}, 250 * time.Millisecond, true},
		{"retry-after seconds", []string{"retry-after", "2"}, 2 * time.Second, true},
		{"retry-after HTTP date", []string{"retry-after", now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second, true},
		{"retry-after date in the past", []string{"retry-after", now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"ms wins over seconds", []string{"retry-after", "9", "retry-after-ms", "10"}, 10 * time.Millisecond, true},
		{"retry-after-ms wins over x-ms", []string{"x-ms-retry-after-ms", "9", "retry-after-ms", "10"}, 10 * time.Millisecond, true},
		{"bad ms falls through to seconds", []string{"retry-after-ms", "soon", "retry-after", "1"}, time.Second, true},
		{"garbage", []string{"retry-after", "later"}, 0, false},
		{"negative", []string{"retry-after", "-1"}, 0, false},
		{"huge is capped", []string{"retry-after", "1e12"}, maxRetryAfter, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				h.Set(tt.headers[i], tt.headers[i+1])
			}
			got, ok := ParseRetryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestRetryableErrorTypes: a listed status is retried unless the answer's
// class says the same call fails again.
func TestRetryableErrorTypes(t *testing.T) {
	rc := &Retry{Attempts: 2, OnStatusCodes: []int{400, 429, 503}}
	tests := []struct {
		name string
		o    Outcome
		want bool
	}{
		{"rate limited 429", Outcome{Status: 429, ErrorType: providers.ErrRateLimited}, true},
		{"overloaded 503", Outcome{Status: 503, ErrorType: providers.ErrOverloaded}, true},
		{"unclassified 503", Outcome{Status: 503}, true},
		{"quota 429", Outcome{Status: 429, ErrorType: providers.ErrQuotaExhausted}, false},
		{"context 400", Outcome{Status: 400, ErrorType: providers.ErrContextLength}, false},
		{"content policy 400", Outcome{Status: 400, ErrorType: providers.ErrContentPolicy}, false},
		{"invalid 400", Outcome{Status: 400, ErrorType: providers.ErrInvalidRequest}, false},
		{"timeout", Outcome{Status: 408, Cause: CauseTimeout}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Retryable(rc, tt.o); got != tt.want {
				t.Fatalf("Retryable = %v, want %v", got, tt.want)
			}
		})
	}
}
