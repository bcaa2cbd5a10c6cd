package console

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

// UnmarshalCaddyfile parses the llm_console directive:
//
//	llm_console {
//		api         <url>
//		session_ttl <duration>
//	}
//
// api is the gateway's base URL including /v1 (default: the listener
// that accepted the console's request, over plain HTTP; set it when the
// console is served over TLS). session_ttl is how long a sign-in lasts
// (default 8h). Mount it with handle_path so links resolve:
//
//	handle_path /console/* {
//		llm_console
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "api":
			if !d.Args(&h.API) {
				return d.ArgErr()
			}
		case "session_ttl":
			var v string
			if !d.Args(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("llm_console: session_ttl must be a positive duration, got %q", v)
			}
			h.SessionTTL = caddy.Duration(dur)
		default:
			return d.Errf("llm_console: unknown option %q", d.Val())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return h.validate()
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Handler)(nil)
