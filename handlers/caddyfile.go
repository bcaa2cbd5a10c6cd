package handlers

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/realtime"
)

// The handler and its directive are registered together, so importing the
// package is enough to use either.
func init() {
	caddy.RegisterModule(Gateway{})
	httpcaddyfile.RegisterHandlerDirective("llm_gateway", parseCaddyfile)
	// Before reverse_proxy: both are terminal, and a site that proxies
	// everything else keeps the gateway's routes for itself.
	httpcaddyfile.RegisterDirectiveOrder("llm_gateway", httpcaddyfile.Before, "reverse_proxy")
}

// parseCaddyfile sets up the handler from Caddyfile tokens.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	g := new(Gateway)
	if err := g.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return g, nil
}

// UnmarshalCaddyfile parses the llm_gateway directive:
//
//	llm_gateway [<matcher>] {
//		max_request_body  <size>
//		max_response_body <size>
//		cache_size        <size>
//		trace_content
//		custom_host_allow <loopback|private|link_local|any|CIDR>...
//		batch_mode        <native|managed>
//		management        <on|off>
//		transport http {
//			<reverse_proxy http transport options>
//		}
//		realtime {
//			<realtime session bounds: see realtime.Config>
//		}
//	}
//
// The block is optional. management off stops the route answering the
// management API (keys, configs, prompts, policies, logs, …; served by
// llm_api where the operator chooses): those paths get a 404 and never
// reach a provider. custom_host_allow may repeat; its entries add up.
// Only reverse_proxy's http transport is accepted, parsed by that module,
// so it takes the same options as in reverse_proxy.
func (g *Gateway) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "max_request_body":
			n, err := parseSize(d)
			if err != nil {
				return err
			}
			g.MaxRequestBody = n
		case "max_response_body":
			n, err := parseSize(d)
			if err != nil {
				return err
			}
			g.MaxResponseBody = n
		case "cache_size":
			n, err := parseSize(d)
			if err != nil {
				return err
			}
			g.CacheSize = n
		case "trace_content":
			if d.NextArg() {
				return d.ArgErr()
			}
			g.TraceContent = true
		case "custom_host_allow":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			g.CustomHostAllow = append(g.CustomHostAllow, args...)
		case "batch_mode":
			if !d.Args(&g.BatchMode) || d.NextArg() {
				return d.ArgErr()
			}
			if g.BatchMode != BatchNative && g.BatchMode != BatchManaged {
				return d.Errf("batch_mode: %q is neither %s nor %s", g.BatchMode, BatchNative, BatchManaged)
			}
		case "management":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			switch v {
			case "on":
				g.ManagementOff = false
			case "off":
				g.ManagementOff = true
			default:
				return d.Errf("management: %q is neither on nor off", v)
			}
		case "transport":
			var name string
			if !d.Args(&name) {
				return d.ArgErr()
			}
			if name != "http" {
				return d.Errf("transport: only the http transport is supported, got %q", name)
			}
			unm, err := caddyfile.UnmarshalModule(d, "http.reverse_proxy.transport."+name)
			if err != nil {
				return err
			}
			g.Transport = caddyconfig.JSONModuleObject(unm, "protocol", name, nil)
		case "realtime":
			g.Realtime = new(realtime.Config)
			if err := g.Realtime.UnmarshalCaddyfile(d); err != nil {
				return err
			}
		default:
			return d.Errf("unknown llm_gateway option %q", d.Val())
		}
	}
	return nil
}

// parseSize reads the size argument of the option d is on: a positive
// number of bytes, in humanize's units (1MB, 8MiB).
func parseSize(d *caddyfile.Dispenser) (int64, error) {
	opt := d.Val()
	var v string
	if !d.Args(&v) {
		return 0, d.ArgErr()
	}
	n, err := humanize.ParseBytes(v)
	if err != nil || n == 0 {
		return 0, d.Errf("%s: invalid size %q", opt, v)
	}
	return int64(n), nil
}

// Interface guards.
var _ caddyfile.Unmarshaler = (*Gateway)(nil)
