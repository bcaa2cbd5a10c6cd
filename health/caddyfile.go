package health

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	hh := new(Handler)
	if err := hh.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return hh, nil
}

// UnmarshalCaddyfile parses the llm_health directive:
//
//	llm_health [<matcher>] live|ready {
//		timeout    <duration>
//		cache      <duration>
//		fail_on    redis|ledger...
//		access_log
//	}
//
// live answers 200 while the process serves; ready answers 200 while the
// instance can serve: {"status":"ok"} when every shared store the llm app
// uses answers a ping within timeout (default 1s), {"status":"degraded",…}
// naming the stores that do not (a store every replica shares never takes
// the fleet out of rotation), 503 naming the stores listed in fail_on
// that do not answer, and 503 "draining" once Caddy is exiting. cache is how long one round of pings answers probes
// (default 1s; 0 pings on every probe). access_log keeps probes in the
// access log (they are skipped by default). The directive is ordered
// before basic_auth; give it its own handle block, e.g.
//
//	handle /readyz {
//		llm_health ready
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if !d.NextArg() {
		return d.Errf("llm_health: want live or ready")
	}
	h.Check = d.Val()
	if h.Check != CheckLive && h.Check != CheckReady {
		return d.Errf("llm_health: want live or ready, got %q", h.Check)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if h.Check == CheckLive && d.Val() != "access_log" {
			return d.Errf("llm_health: live takes only access_log, got %q", d.Val())
		}
		switch d.Val() {
		case "timeout", "cache":
			opt := d.Val()
			var v string
			if !d.Args(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil {
				return d.Errf("llm_health: %s: %v", opt, err)
			}
			if opt == "timeout" {
				if dur <= 0 || dur > MaxTimeout {
					return d.Errf("llm_health: timeout must be above 0 and at most %s", MaxTimeout)
				}
				h.Timeout = caddy.Duration(dur)
				continue
			}
			if dur < 0 || dur > MaxCache {
				return d.Errf("llm_health: cache must be between 0 and %s", MaxCache)
			}
			c := caddy.Duration(dur)
			h.Cache = &c
		case "fail_on":
			stores := d.RemainingArgs()
			if len(stores) == 0 {
				return d.ArgErr()
			}
			for _, s := range stores {
				if s != StoreRedis && s != StoreLedger {
					return d.Errf("llm_health: fail_on: unknown store %q (want %s or %s)", s, StoreRedis, StoreLedger)
				}
			}
			h.FailOn = append(h.FailOn, stores...)
		case "access_log":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AccessLog = true
		default:
			return d.Errf("llm_health: unknown option %q", d.Val())
		}
	}
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Handler)(nil)
