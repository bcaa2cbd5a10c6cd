package apiserver

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_api", parseCaddyfile)
	// Where llm_gateway is ordered: both are terminal.
	httpcaddyfile.RegisterDirectiveOrder("llm_api", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile parses the llm_api directive, which takes no
// arguments and no block:
//
//	llm_api [<matcher>]
//
// It serves the management API of the llm app's api modules (all of them
// unless the llm app's "api" option names some) on the site it is in.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("llm_api takes no block")
	}
	return nil
}
