package upstream

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
)

// WrapTransport applies the egress guard to every way t dials: DialContext
// (see Wrap) and, when set, DialTLSContext. Caddy's http transport sets
// DialTLSContext whenever the TLS server name is a placeholder (as the
// gateway's is), and that function dials through Caddy's own dialer, not
// t.DialContext: wrapping DialContext alone leaves HTTPS custom hosts
// unguarded.
func WrapTransport(t *http.Transport) {
	if t == nil {
		return
	}
	if t.DialContext != nil {
		t.DialContext = Wrap(t.DialContext)
	} else {
		t.DialContext = Wrap((&net.Dialer{}).DialContext)
	}
	if t.DialTLSContext != nil {
		t.DialTLSContext = WrapTLS(t.DialTLSContext)
	}
}

// WrapTLS guards a DialTLSContext function whose dialer the gateway cannot
// reach. For a request marked by WithGuard the name is resolved here, every
// address is checked, and dialTLS is handed only allowed IP literals, so it
// connects to nothing the policy refuses (and nothing a later resolution
// could swap in). The TLS server name does not come from addr, so
// certificates are still checked against the host name. Unmarked requests
// dial unchanged.
func WrapTLS(dialTLS DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		g := GuardFrom(ctx)
		if g == nil {
			return dialTLS(ctx, network, addr)
		}
		ips, port, err := g.resolve(ctx, addr)
		if err != nil {
			return nil, err
		}
		var lastErr error = ErrBlocked
		for _, ip := range ips {
			if !g.Allowed(ip) {
				continue
			}
			conn, err := dialTLS(ctx, network, net.JoinHostPort(ip.Unmap().String(), strconv.Itoa(int(port))))
			if err == nil {
				return conn, nil
			}
			lastErr = err
		}
		return nil, lastErr
	}
}

// resolve returns the addresses of addr's host (the host itself when it is
// an IP literal) and its port.
func (g *Guard) resolve(ctx context.Context, addr string) ([]netip.Addr, uint16, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, ErrBlocked
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, 0, ErrBlocked
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, uint16(port), nil
	}
	ips, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, 0, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	return ips, uint16(port), nil
}

func (g *Guard) resolver() *net.Resolver {
	if g != nil && g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}
