package mcp

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

// The directive is registered beside the module (module.go), so
// importing the package is enough to use either.
func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_mcp", parseCaddyfile)
	// Before reverse_proxy, as llm_gateway: both are terminal, and a site
	// that proxies everything else keeps /mcp for the gateway.
	httpcaddyfile.RegisterDirectiveOrder("llm_mcp", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile parses the llm_mcp directive:
//
//	llm_mcp [<matcher>] {
//		egress_allow     <loopback|private|link_local|any|CIDR>...
//		max_request_body <size>
//	}
//
// The block is optional; egress_allow may repeat, its entries add up.
// The servers themselves are declared in the llm app (`mcp_server`).
// Mount it on the paths it serves, /mcp and /mcp/{server}:
//
//	handle /mcp* {
//		llm_mcp
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "egress_allow":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.EgressAllow = append(h.EgressAllow, args...)
		case "max_request_body":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<30 {
				return d.Errf("max_request_body: invalid size %q (at most 1GiB)", v)
			}
			h.MaxRequestBody = int64(n)
		default:
			return d.Errf("unknown llm_mcp option %q", d.Val())
		}
	}
	return nil
}

// Interface guards.
var _ caddyfile.Unmarshaler = (*Handler)(nil)
