package mcp

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth 2 client credentials. A server configured with
// oauth_client_credentials gets, on every request the gateway makes to it
// (the SDK's and the raw calls alike: they share the remote's transport),
// an access token the gateway obtained with its own client credentials.
// The token is kept until it expires (oauth2.ReuseTokenSource renews it
// shortly before) or until the server answers 401 to it; the request is
// then sent once more with a new token. The token endpoint is reached
// through the route's egress guard like the server, without proxy or
// redirects; its answers are bounded by the oauth2 package (1 MiB).

// errNoToken is a token the gateway could not obtain; its cause (the
// authorization server's answer) is logged, never sent to a caller.
var errNoToken = errors.New("the gateway could not obtain the MCP server's access token")

// tokens is one server's token source.
type tokens struct {
	cfg *clientcredentials.Config
	// ctx carries the token endpoint's HTTP client and lives as long as
	// the handler.
	ctx context.Context

	mu  sync.Mutex
	src oauth2.TokenSource
	gen uint64
}

func newTokens(life context.Context, cfg *clientcredentials.Config, hc *http.Client) *tokens {
	t := &tokens{cfg: cfg, ctx: context.WithValue(life, oauth2.HTTPClient, hc)}
	t.src = oauth2.ReuseTokenSource(nil, cfg.TokenSource(t.ctx))
	return t
}

// token returns the current access token and its generation.
func (t *tokens) token() (string, uint64, error) {
	t.mu.Lock()
	src, gen := t.src, t.gen
	t.mu.Unlock()
	tok, err := src.Token()
	if err != nil || tok.AccessToken == "" {
		return "", gen, errors.Join(errNoToken, err)
	}
	return tok.AccessToken, gen, nil
}

// refused forgets the token of generation gen, which the server refused,
// unless a newer one replaced it already.
func (t *tokens) refused(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen == gen {
		t.gen++
		t.src = oauth2.ReuseTokenSource(nil, t.cfg.TokenSource(t.ctx))
	}
}

// authorize sends r through next with an access token, and once more
// with a new one when the server refuses it (401) and r can be sent
// again.
func (t *tokens) authorize(r *http.Request, next http.RoundTripper) (*http.Response, error) {
	tok, gen, err := t.token()
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	retry := r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
	resp, err := next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !retry {
		return resp, err
	}
	t.refused(gen)
	again := r.Clone(r.Context())
	if r.GetBody != nil {
		if again.Body, err = r.GetBody(); err != nil {
			return resp, nil
		}
	}
	if tok, _, err = t.token(); err != nil {
		return resp, nil
	}
	resp.Body.Close()
	again.Header.Set("Authorization", "Bearer "+tok)
	return next.RoundTrip(again)
}
