package ratelimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

func TestFormatReset(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{time.Nanosecond, "1ms"},
		{12 * time.Millisecond, "12ms"},
		{999*time.Millisecond + 1, "1s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "2s"},
		{6 * time.Minute, "6m0s"},
		{6*time.Minute + time.Millisecond, "6m1s"},
		{24 * time.Hour, "24h0m0s"},
	}
	for _, tt := range tests {
		if got := formatReset(tt.in); got != tt.want {
			t.Errorf("formatReset(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRetryHeaders(t *testing.T) {
	tests := []struct {
		wait                  time.Duration
		secs, ms, shouldRetry string
	}{
		{0, "1", "1", ""},
		{time.Microsecond, "1", "1", ""},
		{1500 * time.Millisecond, "2", "1500", ""},
		{time.Minute, "60", "60000", ""},
		{time.Minute + time.Millisecond, "61", "60001", "false"},
		{5 * time.Hour, "18000", "18000000", "false"},
	}
	for _, tt := range tests {
		h := http.Header{}
		setRetryHeaders(h, tt.wait)
		if h.Get("Retry-After") != tt.secs || h.Get("retry-after-ms") != tt.ms || h.Get("x-should-retry") != tt.shouldRetry {
			t.Errorf("wait %v: %v", tt.wait, h)
		}
	}
}

// TestSetHeadersTightest checks that each type's headers come from its
// tightest policy, and that a type that did not match sets nothing.
func TestSetHeadersTightest(t *testing.T) {
	req := func(remaining, limit int64, reset time.Duration) grant {
		return grant{policy: &policies.Policy{Type: policies.TypeRequests}, dec: policies.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}}
	}
	tok := func(remaining, limit int64) grant {
		return grant{policy: &policies.Policy{Type: policies.TypeTokens}, dec: policies.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: time.Hour}}
	}
	tests := []struct {
		name string
		v    verdict
		want map[string]string
	}{
		{name: "requests only", v: verdict{grants: []grant{req(9, 10, 6*time.Second)}},
			want: map[string]string{hdrLimitRequests: "10", hdrRemainingRequests: "9", hdrResetRequests: "6s", hdrLimitTokens: ""}},
		{name: "fewest remaining wins", v: verdict{grants: []grant{req(90, 100, time.Second), req(5, 1000, time.Minute)}},
			want: map[string]string{hdrLimitRequests: "1000", hdrRemainingRequests: "5", hdrResetRequests: "1m0s"}},
		{name: "tie goes to the smaller limit", v: verdict{grants: []grant{req(5, 1000, time.Minute), req(5, 10, time.Second)}},
			want: map[string]string{hdrLimitRequests: "10", hdrResetRequests: "1s"}},
		{name: "both types", v: verdict{grants: []grant{req(1, 2, time.Second), tok(500, 1000)}},
			want: map[string]string{hdrLimitRequests: "2", hdrLimitTokens: "1000", hdrRemainingTokens: "500", hdrResetTokens: "1h0m0s"}},
		{name: "refused counts", v: verdict{grants: []grant{tok(900, 1000)}, refused: &grant{policy: &policies.Policy{Type: policies.TypeTokens}, dec: policies.Decision{Limit: 50, Remaining: 3}}},
			want: map[string]string{hdrLimitTokens: "50", hdrRemainingTokens: "3", hdrResetTokens: "0s", hdrLimitRequests: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			setHeaders(h, &tt.v)
			for k, want := range tt.want {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		body string
		size int64 // 0: len(body)
		want int64
	}{
		{name: "empty", body: "", want: 0},
		{name: "prompt only", body: `{"model":"m","messages":[]}`, want: 7}, // 27 bytes
		{name: "max_tokens", body: `{"model":"m","max_tokens":100}`, want: 8 + 100},
		{name: "max_completion_tokens wins", body: `{"max_tokens":100,"max_completion_tokens":7}`, want: 11 + 7},
		{name: "responses max_output_tokens", body: `{"max_output_tokens":64}`, want: 6 + 64},
		{name: "n choices", body: `{"max_tokens":10,"n":3}`, want: 6 + 30},
		{name: "n bounded", body: `{"max_tokens":10,"n":100000}`, want: 7 + 1280},
		{name: "negative max_tokens ignored", body: `{"max_tokens":-5}`, want: 5},
		{name: "string max_tokens ignored", body: `{"max_tokens":"5"}`, want: 5},
		{name: "huge max_tokens bounded", body: `{"max_tokens":1e300}`, want: maxEstimate},
		{name: "size beyond what was read", body: "", size: 4001, want: 1001},
		{name: "absurd size bounded", body: "", size: 1 << 62, want: maxEstimate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.size
			if size == 0 {
				size = int64(len(tt.body))
			}
			if got := estimateTokens([]byte(tt.body), size); got != tt.want {
				t.Errorf("estimateTokens = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestRejectMessage(t *testing.T) {
	name := "team budget"
	named := &policies.Policy{ID: "6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21", Name: &name, Type: "tokens", Unit: "rph", Value: 5000}
	anon := &policies.Policy{ID: "6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21", Type: "requests", Unit: "rpm", Value: 3}
	for p, want := range map[*policies.Policy]string{
		named: `Rate limit exceeded: policy "team budget" (6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21) allows 5000 tokens per hour. Retry after 6m0s.`,
		anon:  `Rate limit exceeded: policy 6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21 allows 3 requests per minute. Retry after 6m0s.`,
	} {
		if got := rejectMessage(p, 6*time.Minute); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

func TestOutage(t *testing.T) {
	var o outage
	if o.failFast() {
		t.Fatal("a healthy backend fails fast")
	}
	o.failed()
	for i := 0; i < 2; i++ {
		if !o.failFast() {
			t.Fatal("an open breaker lets calls through")
		}
	}
	// The open period is over: exactly one caller probes.
	o.until.Store(time.Now().Add(-time.Millisecond).UnixNano())
	if o.failFast() {
		t.Fatal("no probe after the open period")
	}
	if !o.failFast() {
		t.Fatal("a second caller probes too")
	}
	o.ok()
	if o.failFast() {
		t.Fatal("a closed breaker fails fast")
	}
}
