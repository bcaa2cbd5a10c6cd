package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// A remote is one declared MCP server as one llm_mcp handler reaches
// it: an SDK client session, opened on first use and shared by every
// caller of the handler (the credentials are the gateway's, the same for
// all), reopened after it fails. Every connection it makes goes through
// the handler's egress guard, on the resolved address, and only to the
// server's own origin; the caller's headers never reach it.

// Bounds of an upstream's connections.
const (
	// connectTimeout bounds opening a session (dial, TLS, the protocol's
	// discovery or initialize).
	connectTimeout = 10 * time.Second
	// maxEventSize bounds one server-sent event read from a server.
	maxEventSize = 4 << 20
)

type remote struct {
	cfg    *app.MCPServerConfig
	client *sdk.Client
	hc     *http.Client
	// life is the handler's lifetime: a session's long-lived streams (the
	// SSE transport's GET) end with it, not with the request that opened
	// the session.
	life context.Context

	mu sync.Mutex
	cs *sdk.ClientSession
	// opening is closed when the open under way ends (nil: none).
	opening chan struct{}
	openErr error

	// catalog is the server's tools and prompts as last listed.
	catalog catalog
	// leftOut throttles the log line of /mcp leaving the server out.
	leftOut logthrottle.Throttle
	// callIDs numbers the calls posted raw (rawcall.go): the session is
	// shared, so the callers' own ids could collide on it.
	callIDs atomic.Uint64
}

// newRemote prepares cfg's upstream. Nothing connects until a call
// needs the server.
func newRemote(life context.Context, cfg *app.MCPServerConfig, guard *upstream.Guard, progress *progressRoutes) *remote {
	u := &remote{cfg: cfg, life: life, hc: guardedClient(life, cfg, guard)}
	u.client = sdk.NewClient(&sdk.Implementation{Name: "caddy-llm-gateway", Version: "1"}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: the gateway has none of the
		// client's own, and relays no server-to-client request in phase 1.
		Capabilities:                &sdk.ClientCapabilities{},
		ProgressNotificationHandler: progress.relay,
		ToolListChangedHandler:      func(context.Context, *sdk.ToolListChangedRequest) { u.catalog.invalidate() },
		PromptListChangedHandler:    func(context.Context, *sdk.PromptListChangedRequest) { u.catalog.invalidate() },
		// An input-required result goes back to the caller as it came.
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
	})
	return u
}

// guardedClient is the HTTP client of cfg's server: dials checked by
// guard, no proxy (which would hide the destination from it), no
// redirects (which would carry the server's credentials elsewhere), and
// the server's headers (and OAuth token) added on requests to its own
// origin only.
func guardedClient(life context.Context, cfg *app.MCPServerConfig, guard *upstream.Guard) *http.Client {
	ot := &originTransport{cfg: cfg, next: guardedTransport(guard)}
	if cfg.OAuth != nil {
		// The token endpoint is another origin: its own client, as
		// guarded, never given the server's headers.
		ot.tokens = newTokens(life, cfg.OAuth, &http.Client{Transport: guardedTransport(guard),
			Timeout: connectTimeout, CheckRedirect: noRedirects})
	}
	return &http.Client{Transport: ot, CheckRedirect: noRedirects}
}

// guardedTransport dials through guard only.
func guardedTransport(guard *upstream.Guard) *http.Transport {
	d := guard.Dialer()
	d.Timeout = connectTimeout
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: connectTimeout,
	}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// originTransport adds the server's configured headers to each request
// and refuses any request to another origin: the SSE transport posts to
// an endpoint the server names, which must not take the credentials to
// another host.
type originTransport struct {
	cfg  *app.MCPServerConfig
	next http.RoundTripper
	// tokens is the OAuth token source (nil: none configured).
	tokens *tokens
}

// errOtherOrigin is the refusal of a request to another origin.
var errOtherOrigin = errors.New("the MCP server named an endpoint on another origin")

func (t *originTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != t.cfg.URL.Scheme || r.URL.Host != t.cfg.URL.Host {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errOtherOrigin
	}
	r = r.Clone(r.Context())
	for k, v := range t.cfg.Header {
		r.Header[k] = v
	}
	injectTrace(r)
	if t.tokens != nil {
		return t.tokens.authorize(r, t.next)
	}
	return t.next.RoundTrip(r)
}

// session returns the open session, opening one if none is (one open at
// a time; callers arriving meanwhile wait for it).
func (u *remote) session(ctx context.Context) (*sdk.ClientSession, error) {
	u.mu.Lock()
	if u.cs != nil {
		cs := u.cs
		u.mu.Unlock()
		return cs, nil
	}
	wait := u.opening
	if wait == nil {
		wait = make(chan struct{})
		u.opening = wait
		go u.open(wait)
	}
	u.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, nil
	}
	return nil, u.openErr
}

// open connects, under the handler's lifetime and connectTimeout, then
// closes done.
func (u *remote) open(done chan struct{}) {
	ctx, cancel := context.WithTimeout(u.life, connectTimeout)
	defer cancel()
	cs, err := u.client.Connect(ctx, &lifetimeTransport{Transport: u.transport(), life: u.life}, nil)
	u.mu.Lock()
	u.opening, u.openErr = nil, err
	if err == nil {
		u.cs = cs
	}
	u.mu.Unlock()
	close(done)
	if err == nil {
		go func() {
			_ = cs.Wait()
			u.drop(cs)
		}()
	}
}

func (u *remote) transport() sdk.Transport {
	if u.cfg.Transport == app.MCPTransportSSE {
		return &sdk.SSEClientTransport{Endpoint: u.cfg.URL.String(), HTTPClient: u.hc, MaxEventSize: maxEventSize}
	}
	return &sdk.StreamableClientTransport{
		Endpoint:   u.cfg.URL.String(),
		HTTPClient: u.hc,
		// A broken stream is an error for the caller now, not a
		// reconnection loop of seconds.
		MaxRetries: -1,
		// Server-initiated messages outside a call are not relayed in
		// phase 1; list changes are caught by the catalog's expiry.
		DisableStandaloneSSE: true,
		MaxEventSize:         maxEventSize,
	}
}

// lifetimeTransport connects its transport under the handler's lifetime:
// the SSE transport's GET lives as long as the context it is opened with.
type lifetimeTransport struct {
	sdk.Transport
	life context.Context
}

func (t *lifetimeTransport) Connect(context.Context) (sdk.Connection, error) {
	return t.Transport.Connect(t.life)
}

// drop forgets cs if it is the open session (it failed or ended), so the
// next call opens another, and closes it in the background: closing a
// streamable session DELETEs it, which a server that is down answers
// only when the SDK's timeout (5 s) ends, and no caller waits for that.
func (u *remote) drop(cs *sdk.ClientSession) {
	u.mu.Lock()
	if u.cs == cs {
		u.cs = nil
	}
	u.mu.Unlock()
	go cs.Close()
}

// close ends the open session, when the handler is cleaned up, in the
// background as drop does: a reload does not wait on a server's DELETE.
func (u *remote) close() {
	u.mu.Lock()
	cs := u.cs
	u.cs = nil
	u.mu.Unlock()
	if cs != nil {
		go func() {
			_ = cs.Close()
			u.hc.CloseIdleConnections()
		}()
		return
	}
	u.hc.CloseIdleConnections()
}

// unreachable describes an error reaching the server for its caller and
// the log: the egress guard's refusal is said as such (the address is
// not named), anything else is "unavailable".
func unreachable(server string, err error) string {
	if errors.Is(err, upstream.ErrBlocked) {
		return fmt.Sprintf("the MCP server %q is not reachable: its address is not allowed by this route's egress policy (llm_mcp egress_allow)", server)
	}
	if errors.Is(err, errNoToken) {
		return fmt.Sprintf("the MCP server %q is unavailable: the gateway could not obtain its access token", server)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("the MCP server %q did not answer in time", server)
	}
	return fmt.Sprintf("the MCP server %q is unavailable", server)
}
