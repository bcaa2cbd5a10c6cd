package upstream

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Guard decides which addresses a client-given custom_host may reach. The
// check runs on the connection's actual remote address, after DNS, so a
// name that resolves (or re-resolves) to an internal address is refused.
type Guard struct {
	allowAll bool
	prefixes []netip.Prefix
}

// Named ranges accepted by NewGuard besides CIDRs.
var namedRanges = map[string][]string{
	"loopback":   {"127.0.0.0/8", "::1/128"},
	"private":    {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"},
	"link_local": {"169.254.0.0/16", "fe80::/10"},
}

// NewGuard builds a guard from "loopback", "private", "link_local", "any"
// or CIDR entries. With no entries only public addresses are allowed.
func NewGuard(allow []string) (*Guard, error) {
	g := new(Guard)
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "any" || a == "all" {
			g.allowAll = true
			continue
		}
		cidrs, ok := namedRanges[a]
		if !ok {
			cidrs = []string{a}
		}
		for _, c := range cidrs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return nil, fmt.Errorf("custom_host_allow: %q is not loopback, private, link_local, any or a CIDR", a)
			}
			g.prefixes = append(g.prefixes, p)
		}
	}
	return g, nil
}

// Allowed reports whether a custom host may connect to ip.
func (g *Guard) Allowed(ip netip.Addr) bool {
	if g.allowAll {
		return true
	}
	ip = ip.Unmap()
	for _, p := range g.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return isPublic(ip)
}

func isPublic(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, c := range reserved {
		if c.Contains(ip) {
			return false
		}
	}
	return true
}

var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

type guardKey struct{}

// WithGuard marks ctx so the guarded dialer checks the connection; requests
// to the gateway's built-in provider URLs carry no mark and are not checked.
func WithGuard(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// DialFunc is the shape of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Wrap returns a dialer that enforces the guard found in ctx, if any.
func Wrap(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		g, _ := ctx.Value(guardKey{}).(*Guard)
		if g == nil {
			return conn, nil
		}
		ap, perr := netip.ParseAddrPort(conn.RemoteAddr().String())
		if perr != nil || !g.Allowed(ap.Addr()) {
			_ = conn.Close()
			return nil, &BlockedError{Addr: addr}
		}
		return conn, nil
	}
}

// BlockedError is returned when a custom host resolved to a disallowed
// address.
type BlockedError struct{ Addr string }

func (e *BlockedError) Error() string {
	return "custom_host " + e.Addr + " resolves to an address this gateway does not allow (see custom_host_allow)"
}
