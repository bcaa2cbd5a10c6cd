// Package upstream connects the gateway to Caddy's reverse_proxy: a dynamic
// upstream source that dials whatever host the current attempt chose, and a
// dial-time guard that keeps client-given custom hosts away from internal
// networks.
package upstream

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// VarDial and VarServerName are the request variables an attempt sets
// before calling the proxy: the host:port to dial and the TLS server name.
const (
	VarDial       = "llm_gateway.upstream_dial"
	VarServerName = "llm_gateway.upstream_host"
)

// SourceModuleName is the dynamic upstream source's name under
// http.reverse_proxy.upstreams.
const SourceModuleName = "llm_gateway"

func init() {
	caddy.RegisterModule(Source{})
}

// Source is the dynamic upstream source the gateway's proxies use. It
// returns the one upstream the current attempt chose, so Caddy keeps
// per-address passive health and connection state for every provider host.
type Source struct{}

// CaddyModule returns the Caddy module information.
func (Source) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.upstreams." + SourceModuleName,
		New: func() caddy.Module { return new(Source) },
	}
}

// GetUpstreams implements reverseproxy.UpstreamSource.
func (Source) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	dial, _ := caddyhttp.GetVar(r.Context(), VarDial).(string)
	if dial == "" {
		return nil, errNoDial
	}
	return []*reverseproxy.Upstream{{Dial: dial}}, nil
}

type dialError string

func (e dialError) Error() string { return string(e) }

const errNoDial = dialError("llm_gateway: no upstream chosen for this request")

var _ reverseproxy.UpstreamSource = Source{}
