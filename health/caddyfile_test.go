package health

import (
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		ok      bool
		check   string
		timeout time.Duration
		cache   *time.Duration
		log     bool
		failOn  []string
	}{
		{name: "live", in: `llm_health live`, ok: true, check: "live"},
		{name: "ready", in: `llm_health ready`, ok: true, check: "ready"},
		{name: "live logged", in: "llm_health live {\n access_log\n}", ok: true, check: "live", log: true},
		{name: "ready options", in: "llm_health ready {\n timeout 250ms\n cache 2s\n access_log\n}", ok: true, check: "ready",
			timeout: 250 * time.Millisecond, cache: ptr(2 * time.Second), log: true},
		{name: "cache zero", in: "llm_health ready {\n cache 0s\n}", ok: true, check: "ready", cache: ptr(0)},
		{name: "fail_on", in: "llm_health ready {\n fail_on redis ledger\n}", ok: true, check: "ready", failOn: []string{"redis", "ledger"}},
		{name: "fail_on twice", in: "llm_health ready {\n fail_on redis\n fail_on ledger\n}", ok: true, check: "ready", failOn: []string{"redis", "ledger"}},
		{name: "fail_on without store", in: "llm_health ready {\n fail_on\n}"},
		{name: "fail_on unknown store", in: "llm_health ready {\n fail_on postgres\n}"},
		{name: "fail_on on live", in: "llm_health live {\n fail_on redis\n}"},
		{name: "no check", in: `llm_health`},
		{name: "unknown check", in: `llm_health startup`},
		{name: "extra arg", in: `llm_health ready now`},
		{name: "live with timeout", in: "llm_health live {\n timeout 1s\n}"},
		{name: "zero timeout", in: "llm_health ready {\n timeout 0s\n}"},
		{name: "huge timeout", in: "llm_health ready {\n timeout 1h\n}"},
		{name: "bad timeout", in: "llm_health ready {\n timeout soon\n}"},
		{name: "timeout without value", in: "llm_health ready {\n timeout\n}"},
		{name: "negative cache", in: "llm_health ready {\n cache -1s\n}"},
		{name: "huge cache", in: "llm_health ready {\n cache 2h\n}"},
		{name: "access_log with arg", in: "llm_health ready {\n access_log yes\n}"},
		{name: "unknown option", in: "llm_health ready {\n redis off\n}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if h.Check != tc.check || time.Duration(h.Timeout) != tc.timeout || h.AccessLog != tc.log || !slices.Equal(h.FailOn, tc.failOn) {
				t.Fatalf("got %+v", h)
			}
			if (h.Cache == nil) != (tc.cache == nil) || (h.Cache != nil && time.Duration(*h.Cache) != *tc.cache) {
				t.Fatalf("cache = %v, want %v", h.Cache, tc.cache)
			}
			if err := h.validate(); err != nil {
				t.Fatalf("a parsed handler fails validation: %v", err)
			}
		})
	}
}

func ptr(d time.Duration) *time.Duration { return &d }
