package realtime

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
)

// Config is the realtime block of llm_gateway: the bounds of its
// WebSocket sessions. Zero fields take the Limits defaults.
type Config struct {
	// MaxMessage is the largest message either side may send, in bytes.
	MaxMessage int64 `json:"max_message,omitempty"`
	// MaxSession is the longest a session may last.
	MaxSession caddy.Duration `json:"max_session,omitempty"`
	// IdleTimeout ends a session without a message for this long.
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`
	// WriteTimeout bounds a write to a peer that does not read.
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`
	// MaxSocketsPerKey bounds the sessions one gateway key holds open on
	// an instance; -1 for no bound.
	MaxSocketsPerKey int `json:"max_sockets_per_key,omitempty"`
	// CloseDelay is how long sessions outlive a reload of the
	// configuration they opened under before they get 1001; zero keeps
	// them until they end.
	CloseDelay caddy.Duration `json:"close_delay,omitempty"`
}

// Limits returns the bounds c configures, defaults filled in; a nil c
// is all defaults.
func (c *Config) Limits() Limits {
	if c == nil {
		return Limits{}.Fill()
	}
	return Limits{
		MaxMessage:   c.MaxMessage,
		MaxSession:   time.Duration(c.MaxSession),
		Idle:         time.Duration(c.IdleTimeout),
		WriteTimeout: time.Duration(c.WriteTimeout),
		MaxPerKey:    c.MaxSocketsPerKey,
		CloseDelay:   time.Duration(c.CloseDelay),
	}.Fill()
}

// UnmarshalCaddyfile parses the realtime block of llm_gateway, the
// dispenser on its name:
//
//	realtime {
//		max_message         <size>
//		max_session         <duration>
//		idle_timeout        <duration>
//		write_timeout       <duration>
//		max_sockets_per_key <n|unlimited>
//		close_delay         <duration>
//	}
func (c *Config) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "max_message":
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<30 {
				return d.Errf("max_message: invalid size %q (1 byte to 1GiB)", v)
			}
			c.MaxMessage = int64(n)
		case "max_session", "idle_timeout", "write_timeout", "close_delay":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("%s: invalid duration %q", opt, v)
			}
			switch opt {
			case "max_session":
				c.MaxSession = caddy.Duration(dur)
			case "idle_timeout":
				c.IdleTimeout = caddy.Duration(dur)
			case "write_timeout":
				c.WriteTimeout = caddy.Duration(dur)
			default:
				c.CloseDelay = caddy.Duration(dur)
			}
		case "max_sockets_per_key":
			if v == "unlimited" {
				c.MaxSocketsPerKey = -1
				break
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("max_sockets_per_key: %q is not a positive number or unlimited", v)
			}
			c.MaxSocketsPerKey = n
		default:
			return d.Errf("unknown realtime option %q", opt)
		}
	}
	return nil
}
