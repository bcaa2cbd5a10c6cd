package realtime

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Limits
		err  bool
	}{
		{`realtime {
			max_message 1MiB
			max_session 30m
			idle_timeout 2m
			write_timeout 5s
			max_sockets_per_key 4
			close_delay 1m
		}`, Limits{MaxMessage: 1 << 20, MaxSession: 30 * time.Minute, Idle: 2 * time.Minute, WriteTimeout: 5 * time.Second, MaxPerKey: 4, CloseDelay: time.Minute}, false},
		{`realtime {
			max_sockets_per_key unlimited
		}`, Limits{MaxPerKey: -1}.Fill(), false},
		{`realtime`, Limits{}.Fill(), false},
		{`realtime { max_message 0 }`, Limits{}, true},
		{`realtime { idle_timeout -1s }`, Limits{}, true},
		{`realtime { max_sockets_per_key 0 }`, Limits{}, true},
		{`realtime { nonsense 1 }`, Limits{}, true},
		{`realtime { max_session }`, Limits{}, true},
		{`realtime extra`, Limits{}, true},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		var c Config
		err := c.UnmarshalCaddyfile(d)
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v", tc.in, err)
			continue
		}
		if err == nil && c.Limits() != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.in, c.Limits(), tc.want)
		}
	}
	var nilConfig *Config
	if nilConfig.Limits() != (Limits{}).Fill() {
		t.Error("a nil config is not all defaults")
	}
}
