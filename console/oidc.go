package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
)

// Sign-in through the identity provider (the llm app's oidc block):
// authorization code with PKCE (S256), a state and a nonce. What the
// callback needs (nonce, PKCE verifier) stays on the server in a
// short-lived, single-use record keyed by the state; the browser holds
// the state in a cookie of its own, so a callback carries the sign-in of
// the browser that began it (no login CSRF). The ID token is verified
// and mapped to a caller by package jwtauth, as token callers are. The
// session's credential is the IdP's own token (its JWT access token, or
// the ID token when only that is for the gateway's audience): no gateway
// key or other long-lived secret is created, and the session ends when
// the token expires (each page authenticates it again).

// Bounds of pending sign-ins.
const (
	// pendingTTL is how long a begun sign-in may take at the IdP.
	pendingTTL = 10 * time.Minute
	// MaxPendingSignIns bounds the begun sign-ins held at once; the
	// sign-in throttle bounds how fast one address adds them.
	MaxPendingSignIns = 10000
	// stateCookie holds the state of the browser's sign-in.
	stateCookie = "llm_console_oidc_state"
	// oidcTimeout bounds the callback's calls to the IdP.
	oidcTimeout = 15 * time.Second
)

// pendingSignIn is a begun sign-in, until its callback.
type pendingSignIn struct {
	nonce, verifier string
	expires         time.Time
}

var errTooManyPending = errors.New("too many sign-ins in progress")

// begin records a new sign-in and returns its state.
func (s *sessions) begin(nonce, verifier string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.pending) >= MaxPendingSignIns {
		for k, p := range s.pending {
			if !now.Before(p.expires) {
				delete(s.pending, k)
			}
		}
		if len(s.pending) >= MaxPendingSignIns {
			return "", errTooManyPending
		}
	}
	state := randomToken()
	s.pending[state] = pendingSignIn{nonce: nonce, verifier: verifier, expires: now.Add(pendingTTL)}
	return state, nil
}

// finish returns and forgets the live sign-in of state: a state is used
// once, so a replayed callback finds nothing.
func (s *sessions) finish(state string) (pendingSignIn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[state]
	delete(s.pending, state)
	return p, ok && s.now().Before(p.expires)
}

// oidcEnabled reports whether the sign-in page offers the IdP.
func (h *Handler) oidcEnabled() bool {
	return h.tokens != nil && h.tokens.Config().ClientID != ""
}

// signinPage is the sign-in page with err.
func (h *Handler) signinPage(err string) *page {
	return &page{Title: "Sign in", Err: err, Data: signinData{OIDC: h.oidcEnabled()}}
}

// signinData is what the sign-in template shows besides the key form.
type signinData struct{ OIDC bool }

// redirectURL is the callback the IdP sends the browser back to: the
// configured redirect_url, else this console's own /oidc/callback.
func (h *Handler) redirectURL(r *http.Request) string {
	if u := h.tokens.Config().RedirectURL; u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + prefix(r) + "/oidc/callback"
}

// oidcLogin begins a sign-in: it records the nonce and PKCE verifier
// under a new state, gives the browser the state, and sends it to the
// IdP's authorization endpoint.
func (h *Handler) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if !h.oidcEnabled() {
		h.fail(w, r, nil, http.StatusNotFound, "sign-in through an identity provider is not configured")
		return
	}
	if wait, ok := h.sessions.admitSignIn(clientAddress(r), ""); !ok {
		h.tooManySignIns(w, r, wait)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), oidcTimeout)
	defer cancel()
	cfg, err := h.tokens.OAuth2Config(ctx, h.redirectURL(r))
	if err != nil {
		h.logger.Warn("console sign-in: the identity provider's discovery", zap.Error(err))
		h.render(w, r, http.StatusBadGateway, "signin", h.signinPage("the identity provider could not be reached; try again later"))
		return
	}
	nonce, verifier := randomToken(), oauth2.GenerateVerifier()
	state, err := h.sessions.begin(nonce, verifier)
	if err != nil {
		h.render(w, r, http.StatusServiceUnavailable, "signin", h.signinPage("too many sign-ins in progress; try again later"))
		return
	}
	http.SetCookie(w, h.stateCookie(r, state, int(pendingTTL.Seconds())))
	http.Redirect(w, r, cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce)), http.StatusFound)
}

// stateCookie is the browser's sign-in state. SameSite=Lax, unlike the
// session's Strict cookie: the IdP's redirect back is a cross-site
// navigation, on which a Strict cookie is not sent.
func (h *Handler) stateCookie(r *http.Request, state string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: stateCookie, Value: state, Path: prefix(r) + "/oidc/", MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode}
}

// oidcCallback finishes a sign-in: the state must be the browser's and
// live (used once), the code is exchanged with the PKCE verifier, the ID
// token must verify with the sign-in's nonce and map to a caller, and
// the IdP's token must authenticate at the gateway; then a session
// starts.
func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if !h.oidcEnabled() {
		h.fail(w, r, nil, http.StatusNotFound, "sign-in through an identity provider is not configured")
		return
	}
	refuse := func(status int, msg string) {
		h.render(w, r, status, "signin", h.signinPage(msg))
	}
	q := r.URL.Query()
	state := q.Get("state")
	ck, err := r.Cookie(stateCookie)
	// The state cookie goes with this answer whatever it says.
	http.SetCookie(w, h.stateCookie(r, "", -1))
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		refuse(http.StatusBadRequest, "this sign-in was not started in this browser; sign in again")
		return
	}
	p, ok := h.sessions.finish(state)
	if !ok {
		refuse(http.StatusBadRequest, "this sign-in has expired or was already used; sign in again")
		return
	}
	if e := q.Get("error"); e != "" {
		refuse(http.StatusUnauthorized, "the identity provider did not sign you in ("+truncate(e, 64)+")")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), oidcTimeout)
	defer cancel()
	cfg, err := h.tokens.OAuth2Config(ctx, h.redirectURL(r))
	if err != nil {
		refuse(http.StatusBadGateway, "the identity provider could not be reached; try again later")
		return
	}
	tok, err := cfg.Exchange(h.tokens.OAuth2Context(ctx), q.Get("code"), oauth2.VerifierOption(p.verifier))
	if err != nil {
		h.logger.Info("console sign-in: the code exchange was refused", zap.Error(err))
		refuse(http.StatusUnauthorized, "the identity provider refused the sign-in's code; sign in again")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		refuse(http.StatusUnauthorized, "the identity provider returned no ID token")
		return
	}
	who, exp, err := h.tokens.VerifyIDToken(ctx, raw, p.nonce)
	if err != nil {
		var reason *jwtauth.Reason
		if errors.As(err, &reason) {
			refuse(http.StatusUnauthorized, "the sign-in is refused: "+reason.Message)
			return
		}
		refuse(http.StatusBadGateway, "the identity provider could not be reached; try again later")
		return
	}
	// The session calls the API with the IdP's token: the access token
	// when the gateway accepts it as this user's, else the ID token.
	cred := ""
	for _, t := range []string{tok.AccessToken, raw} {
		if c, ok := h.auth(t); ok && c.Name == who.Name {
			cred = t
			break
		}
	}
	if cred == "" {
		refuse(http.StatusUnauthorized, "the identity provider's tokens are not for this gateway: list the console's client_id in the oidc audience, or have the provider issue JWT access tokens for it")
		return
	}
	if cred == tok.AccessToken && !tok.Expiry.IsZero() {
		exp = tok.Expiry
	}
	ttl := min(h.ttl(), time.Until(exp))
	if ttl < time.Second {
		refuse(http.StatusUnauthorized, "the identity provider's token has already expired; sign in again")
		return
	}
	id, _, err := h.sessions.create(cred, ttl)
	if err != nil {
		refuse(http.StatusServiceUnavailable, "too many console sessions; try again later")
		return
	}
	http.SetCookie(w, h.cookie(r, id, int(ttl.Seconds())))
	// A page of the console's own moves on to the overview: the redirect
	// chain began at the IdP (cross-site), and a browser would not send
	// the Strict session cookie on the rest of it.
	h.render(w, r, http.StatusOK, "signedin", &page{Title: "Signed in", Refresh: prefix(r) + "/"})
}

// tooManySignIns answers a throttled sign-in.
func (h *Handler) tooManySignIns(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	h.render(w, r, http.StatusTooManyRequests, "signin", h.signinPage("too many sign-in attempts; try again in "+strconv.Itoa(secs)+" seconds"))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
