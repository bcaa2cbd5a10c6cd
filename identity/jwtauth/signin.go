package jwtauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"golang.org/x/oauth2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// The console's sign-in (authorization code with PKCE) uses the same
// issuer, keys, checks and claims mapping as token callers: the ID token
// is verified by the one verifier (audience: the client), and its claims
// map to a caller by the one mapCaller, so groups, domains and claims
// admit and place a person signing in exactly as they do a token caller.

// OAuth2Config returns the console client's OAuth 2.0 configuration for
// redirectURL, with the IdP's endpoints from discovery. Without a
// client_id the console has no sign-in through the IdP.
func (a *Authenticator) OAuth2Config(ctx context.Context, redirectURL string) (*oauth2.Config, error) {
	if a.cfg.ClientID == "" {
		return nil, errors.New("oidc: no client_id for the console's sign-in")
	}
	d, err := a.discover(ctx)
	if err != nil {
		return nil, err
	}
	return &oauth2.Config{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret, RedirectURL: redirectURL,
		Endpoint: d.provider.Endpoint(), Scopes: []string{"openid", "email", "profile"}}, nil
}

// VerifyIDToken checks the ID token of a sign-in: signed by the issuer's
// keys, for the console's client, unexpired, and carrying the nonce the
// sign-in sent (compared in constant time); its claims are mapped as a
// token caller's. It returns the caller and when the token expires, or a
// *Reason.
func (a *Authenticator) VerifyIDToken(ctx context.Context, raw, nonce string) (*identity.Caller, time.Time, error) {
	if len(raw) > MaxTokenBytes {
		return nil, time.Time{}, refuse(CodeInvalidToken, "the ID token is larger than %d bytes", MaxTokenBytes)
	}
	d, err := a.discover(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	v := d.verifier
	v.audiences = []string{a.cfg.ClientID}
	claims, reg, exp, err := v.verify(ctx, raw)
	if err != nil {
		return nil, time.Time{}, err
	}
	got := stringClaim(claims["nonce"])
	if nonce == "" || subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
		return nil, time.Time{}, refuse(CodeInvalidToken, "the ID token's nonce is not this sign-in's")
	}
	id, err := a.cfg.mapCaller(reg.Subject, claims)
	if err != nil {
		return nil, time.Time{}, err
	}
	return id, exp, nil
}
