package guardrails

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// Egress limits. Each check also has its own per-call timeout (webhook
// and log: the "timeout" parameter, default 3 s; validUrls: 3 s per URL).
const (
	// EgressTimeout bounds any one outbound call of a check, whatever the
	// check's parameters say.
	EgressTimeout = 30 * time.Second
	// EgressDialTimeout bounds connecting.
	EgressDialTimeout = 5 * time.Second
	// MaxEgressBody bounds how much of an outbound call's answer a check
	// reads.
	MaxEgressBody = 1 << 20
)

// NewEgressClient returns the client the gateway should put in Env.Client:
// every connection it opens is checked against guard on its resolved
// remote address (the policy of custom_host_allow), so a check cannot be
// pointed at loopback, link-local or private addresses the operator has
// not allowed, even through redirects or DNS that re-resolves. A nil
// guard allows public addresses only.
func NewEgressClient(guard *upstream.Guard) *http.Client {
	if guard == nil {
		guard, _ = upstream.NewGuard(nil)
	}
	d := &net.Dialer{Timeout: EgressDialTimeout, KeepAlive: 30 * time.Second}
	wrapped := upstream.Wrap(d.DialContext)
	tr := &http.Transport{
		Proxy: nil, // a proxy would hide the real destination from the guard
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return wrapped(upstream.WithGuard(ctx, guard), network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: EgressTimeout,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   EgressTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}
