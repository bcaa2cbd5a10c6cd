package upstream

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Guard is the gateway's one egress policy: which IP addresses an outbound
// connection whose address derives from client input (custom_host, Azure
// resource_name, cloud regions and project ids, a service account's
// token_uri) may reach. It is enforced in the dialer's control hook, on the
// resolved address and before the TCP handshake, so a refused address
// never sees a packet, a name that resolves (or re-resolves) to an internal
// address is refused, and every refusal looks the same whether or not
// something listens there.
type Guard struct {
	// Resolver, when set, resolves host names for guarded dials instead
	// of net.DefaultResolver (tests inject one).
	Resolver *net.Resolver

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

// Allowed reports whether an outbound connection may go to ip. A nil guard
// allows everything.
func (g *Guard) Allowed(ip netip.Addr) bool {
	if g == nil || g.allowAll {
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
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
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
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"), // 6to4 can embed any IPv4 address
	netip.MustParsePrefix("2001::/32"), // Teredo, likewise
}

// control is the net.Dialer control hook: address is the resolved
// "ip:port" about to be connected. Returning an error here aborts the dial
// before the socket connects.
func (g *Guard) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !g.Allowed(ap.Addr()) {
		return ErrBlocked
	}
	return nil
}

// DefaultDialTimeout bounds a guarded dial (the context may end it sooner).
const DefaultDialTimeout = 10 * time.Second

// Dialer returns a net.Dialer that applies the guard to every address it
// connects to, after name resolution and before the TCP handshake. A nil
// guard returns a dialer without checks.
func (g *Guard) Dialer() *net.Dialer {
	d := &net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}
	if g != nil {
		d.ControlContext = g.control
		d.Resolver = g.Resolver
	}
	return d
}

// DialContext dials through Dialer. It implements providers.Dialer, for the
// extra connections a provider makes (a service account's token endpoint).
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.Dialer().DialContext(ctx, network, addr)
}

type guardKey struct{}

// WithGuard marks ctx so the dialer returned by Wrap enforces g on the
// request's connections. Requests to the gateway's built-in provider URLs
// or to operator-configured addresses carry no mark and are not checked.
func WithGuard(ctx context.Context, g *Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// GuardFrom returns the guard WithGuard put in ctx, or nil.
func GuardFrom(ctx context.Context) *Guard {
	g, _ := ctx.Value(guardKey{}).(*Guard)
	return g
}

// DialFunc is the shape of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Wrap returns a dialer for the reverse proxy's transport: a request
// marked by WithGuard dials through the guard's own dialer (checked before
// connecting, see Guard); any other request uses dial unchanged.
func Wrap(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if g := GuardFrom(ctx); g != nil {
			return g.DialContext(ctx, network, addr)
		}
		return dial(ctx, network, addr)
	}
}

// BlockedError is the one error every refused address yields. It names
// neither the address nor the port, so a refusal says nothing about what
// listens there.
type BlockedError struct{}

func (*BlockedError) Error() string {
	return "the upstream address derived from this request resolves to an address this gateway does not allow (see custom_host_allow)"
}

// ErrBlocked is the refusal every guarded dial returns; match it with
// errors.As(err, new(*BlockedError)) or errors.Is(err, ErrBlocked).
var ErrBlocked error = &BlockedError{}

// Refusal is the client error for every refused address: the same status,
// code and message whatever the address, port or vector (400,
// custom_host_not_allowed).
func Refusal() *apierror.Error {
	return apierror.BadRequest("custom_host", "%s", ErrBlocked.Error()).WithCode("custom_host_not_allowed")
}
