package jwtauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Cache bounds.
const (
	// MaxCacheEntries bounds the validated tokens kept: past it, expired
	// entries are dropped, then arbitrary ones.
	MaxCacheEntries = 50000
	// refusalTTL bounds how long a refusal is remembered: a token flood
	// repeats no signature check or userinfo call within it.
	refusalTTL = 10 * time.Second
	// discoveryRetry is how long a failed discovery is not retried.
	discoveryRetry = 10 * time.Second
	// authTimeout bounds the IdP calls one authentication may wait for.
	authTimeout = 2 * FetchTimeout
)

// Authenticator validates tokens of one issuer and maps them to callers.
// It is safe for concurrent use; no lock is held across a call to the IdP.
type Authenticator struct {
	cfg    Config
	client *http.Client
	now    func() time.Time

	algs []string

	mu        sync.Mutex
	disc      *discovery
	discErr   error
	discTried time.Time

	cacheMu sync.RWMutex
	cache   map[[sha256.Size]byte]entry

	// observer, when set, hears each validation that was not answered
	// from the cache (see Observe).
	observer atomic.Pointer[func(*identity.Caller, *Reason)]
}

// Observe makes f hear the outcome of every validation the cache did not
// answer: the caller of an accepted token, or the refusal. It runs on
// the request that validated, after the outcome is cached; the record
// store keeps user records with it (app/users.go), so a user is written
// at most once per token per cache_ttl, never on a cached request.
func (a *Authenticator) Observe(f func(*identity.Caller, *Reason)) { a.observer.Store(&f) }

// discovery is what the issuer's discovery document says.
type discovery struct {
	provider *oidc.Provider
	keys     *KeySet
	verifier verifier
	userinfo string
}

// entry is a cached outcome: a caller until it expires, or a refusal.
type entry struct {
	id    *identity.Caller
	err   *Reason
	until time.Time
}

// New returns the authenticator of cfg, which it checks; client is the
// (egress-guarded) client every IdP call goes through. Nothing is fetched
// until the first token: an IdP that is down delays no start.
func New(cfg Config, client *http.Client) (*Authenticator, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	algs, err := parseAlgorithms(cfg.Algorithms)
	if err != nil {
		return nil, err
	}
	a := &Authenticator{cfg: cfg, client: boundedClient(client), now: time.Now, cache: make(map[[sha256.Size]byte]entry)}
	for _, alg := range algs {
		a.algs = append(a.algs, string(alg))
	}
	return a, nil
}

// Config returns the checked configuration (defaults filled).
func (a *Authenticator) Config() Config { return a.cfg }

// LooksLikeJWT reports whether presented is shaped as a compact JWS
// ("eyJ" header, three dot-separated parts): gateway keys never are, so
// only such values take the token road.
func LooksLikeJWT(presented string) bool {
	return strings.HasPrefix(presented, "eyJ") && strings.Count(presented, ".") == 2
}

// Authenticate returns the caller of token, or the *Reason it is
// refused. A token seen within the cache TTL is answered from the cache
// by its full SHA-256 (never a prefix: two tokens never share an entry).
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*identity.Caller, *Reason) {
	if len(token) > MaxTokenBytes {
		return nil, refuse(CodeInvalidToken, "the token is larger than %d bytes", MaxTokenBytes)
	}
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.cacheMu.RLock()
	e, ok := a.cache[key]
	a.cacheMu.RUnlock()
	if ok && now.Before(e.until) {
		return e.id, e.err
	}
	ctx, cancel := context.WithTimeout(ctx, authTimeout)
	defer cancel()
	id, until, err := a.validate(ctx, token)
	var reason *Reason
	if err != nil {
		if !errors.As(err, &reason) {
			reason = refuse(CodeInvalidToken, "the identity provider could not be reached to validate the token")
			// Not remembered: the IdP may answer on the next try.
			return nil, reason
		}
		until = now.Add(min(refusalTTL, time.Duration(a.cfg.CacheTTL)))
	}
	a.store(key, entry{id: id, err: reason, until: until}, now)
	if f := a.observer.Load(); f != nil {
		(*f)(id, reason)
	}
	return id, reason
}

// validate checks token and maps it; until is when its cache entry ends.
func (a *Authenticator) validate(ctx context.Context, token string) (*identity.Caller, time.Time, error) {
	d, err := a.discover(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	claims, reg, exp, err := d.verifier.verify(ctx, token)
	if err != nil {
		return nil, time.Time{}, err
	}
	if a.cfg.UserInfo {
		if claims, err = a.userInfo(ctx, d, token, reg.Subject, claims); err != nil {
			return nil, time.Time{}, err
		}
	}
	id, err := a.cfg.mapCaller(reg.Subject, claims)
	var reason *Reason
	if errors.As(err, &reason) {
		// A verified user the mapping refuses: name it, so its record
		// can be disabled (Observe).
		reason.UserID = userKeyID(a.cfg.Issuer, reg.Subject)
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	return id, minTime(exp, a.now().Add(time.Duration(a.cfg.CacheTTL))), nil
}

// userInfo merges the userinfo endpoint's claims over the token's. Its
// sub must be the token's (OpenID Connect Core 5.3.2).
func (a *Authenticator) userInfo(ctx context.Context, d *discovery, token, sub string, claims map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	if d.userinfo == "" {
		return nil, errors.New("the identity provider publishes no userinfo_endpoint")
	}
	body, err := getDocument(ctx, a.client, d.userinfo, token)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && (se.status == http.StatusUnauthorized || se.status == http.StatusForbidden) {
			return nil, refuse(CodeForbidden, "the identity provider no longer accepts the token (userinfo)")
		}
		return nil, err
	}
	if jsonlimit.CheckFold(body) != nil {
		return nil, refuse(CodeInvalidToken, "the userinfo answer names a claim twice")
	}
	var info map[string]json.RawMessage
	if json.Unmarshal(body, &info) != nil || stringClaim(info["sub"]) != sub {
		return nil, refuse(CodeInvalidToken, "the userinfo answer is not for the token's subject")
	}
	merged := make(map[string]json.RawMessage, len(claims)+len(info))
	for k, v := range claims {
		merged[k] = v
	}
	for k, v := range info {
		merged[k] = v
	}
	return merged, nil
}

// discover reads the issuer's discovery document once (retried no more
// often than discoveryRetry after a failure).
func (a *Authenticator) discover(ctx context.Context) (*discovery, error) {
	a.mu.Lock()
	if a.disc != nil || a.discErr != nil && a.now().Sub(a.discTried) < discoveryRetry {
		d, err := a.disc, a.discErr
		a.mu.Unlock()
		return d, err
	}
	a.mu.Unlock()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, a.client), a.cfg.Issuer)
	var d *discovery
	if err == nil {
		var doc struct {
			JWKS     string `json:"jwks_uri"`
			UserInfo string `json:"userinfo_endpoint"`
		}
		_ = p.Claims(&doc)
		if doc.JWKS == "" {
			err = errors.New("the discovery document has no jwks_uri")
		} else {
			keys := NewKeySet(doc.JWKS, a.client)
			keys.now = a.now
			d = &discovery{provider: p, keys: keys, userinfo: doc.UserInfo, verifier: verifier{
				issuer: a.cfg.Issuer, audiences: a.cfg.Audience, skew: time.Duration(a.cfg.ClockSkew), keys: keys, now: a.now}}
			d.verifier.algs, _ = parseAlgorithms(a.algs)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disc != nil {
		return a.disc, nil
	}
	a.disc, a.discErr, a.discTried = d, err, a.now()
	return d, err
}

// Provider returns the discovered provider and its key set, for the
// console's sign-in (the authorization and token endpoints, and the ID
// token's verifier).
func (a *Authenticator) Provider(ctx context.Context) (*oidc.Provider, *KeySet, error) {
	d, err := a.discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	return d.provider, d.keys, nil
}

// Algorithms are the accepted signing algorithms.
func (a *Authenticator) Algorithms() []string { return a.algs }

// Client returns the client IdP calls go through, for oauth2's token
// exchange (oauth2.HTTPClient in its context).
func (a *Authenticator) Client() *http.Client { return a.client }

// OAuth2Context returns ctx carrying the IdP client for oauth2.
func (a *Authenticator) OAuth2Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, a.client)
}

// store caches e, bounding the cache.
func (a *Authenticator) store(key [sha256.Size]byte, e entry, now time.Time) {
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	if len(a.cache) >= MaxCacheEntries {
		for k, v := range a.cache {
			if !now.Before(v.until) {
				delete(a.cache, k)
			}
		}
		for k := range a.cache {
			if len(a.cache) < MaxCacheEntries*3/4 {
				break
			}
			delete(a.cache, k)
		}
	}
	a.cache[key] = e
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// boundedClient returns a client like c whose answers are bounded to
// MaxDocumentBytes (go-oidc's discovery and oauth2's token exchange read
// whole bodies).
func boundedClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	out := *c
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	out.Transport = limitTransport{rt}
	if out.Timeout == 0 {
		out.Timeout = FetchTimeout
	}
	return &out
}

type limitTransport struct{ rt http.RoundTripper }

func (l limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxDocumentBytes}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

var errTooLarge = errors.New("the identity provider's answer is too large")

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
