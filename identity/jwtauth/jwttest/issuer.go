// Package jwttest is an in-process OpenID Connect issuer for tests: a
// discovery document, a JWKS with RSA and EC keys that rotate, a userinfo
// endpoint whose groups a test changes, and the authorization-code flow
// with PKCE (S256), state and nonce behind a login page (a form naming
// the user).
package jwttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Issuer is a running test IdP.
type Issuer struct {
	*httptest.Server
	// ClientID and ClientSecret are the one registered client.
	ClientID, ClientSecret string
	// Audience is the aud of access tokens the flow issues.
	Audience string

	mu      sync.Mutex
	keys    []signer // published; keys[0] signs by default
	users   map[string]map[string]any
	login   string
	codes   map[string]grant
	jwksHit atomic.Int64
	// nonce, when set, replaces the sign-in's nonce in ID tokens (a
	// misbehaving or replaying IdP).
	nonce string
}

type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key any // private key
	pub any
}

type grant struct {
	sub, nonce, challenge, redirect string
}

// New starts an issuer with one RSA (RS256) and one EC (ES256) key.
func New() *Issuer {
	is := &Issuer{ClientID: "console", ClientSecret: "console-secret", Audience: "gateway",
		users: map[string]map[string]any{}, codes: map[string]grant{}}
	is.keys = []signer{newRSA("rsa-1"), newEC("ec-1")}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("/jwks", is.jwks)
	mux.HandleFunc("/userinfo", is.userinfo)
	mux.HandleFunc("/authorize", is.authorize)
	mux.HandleFunc("/token", is.token)
	is.Server = httptest.NewServer(mux)
	return is
}

func newRSA(kid string) signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return signer{kid: kid, alg: jose.RS256, key: k, pub: &k.PublicKey}
}

func newEC(kid string) signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return signer{kid: kid, alg: jose.ES256, key: k, pub: &k.PublicKey}
}

// JWKSFetches counts the JWKS requests served.
func (is *Issuer) JWKSFetches() int64 { return is.jwksHit.Load() }

// Rotate publishes a new RSA key, which signs from now on, and withdraws
// the old default key; it returns the new kid.
func (is *Issuer) Rotate() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	kid := fmt.Sprintf("rsa-%d", time.Now().UnixNano())
	is.keys = append([]signer{newRSA(kid)}, is.keys[1:]...)
	return kid
}

// SetUser sets the userinfo (and flow) claims of sub, e.g. groups.
func (is *Issuer) SetUser(sub string, claims map[string]any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.users[sub] = claims
}

// SetNonce makes ID tokens carry nonce instead of the sign-in's.
func (is *Issuer) SetNonce(nonce string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.nonce = nonce
}

// SetLogin makes the authorization endpoint sign in sub.
func (is *Issuer) SetLogin(sub string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.login = sub
}

// Claims are a token's claims; Std fills the registered ones.
type Claims map[string]any

// Std returns claims for sub with this issuer, aud and an expiry in ttl.
func (is *Issuer) Std(sub, aud string, ttl time.Duration) Claims {
	now := time.Now()
	return Claims{"iss": is.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
}

// Mint signs claims with the current default key.
func (is *Issuer) Mint(c Claims) string { return is.MintWith(0, c) }

// MintWith signs claims with the published key i (0 RSA, 1 EC).
func (is *Issuer) MintWith(i int, c Claims) string {
	is.mu.Lock()
	s := is.keys[i]
	is.mu.Unlock()
	return Sign(s.alg, s.key, s.kid, c)
}

// MintRaw signs payload, as given, with the current default key.
func (is *Issuer) MintRaw(payload []byte) string {
	is.mu.Lock()
	s := is.keys[0]
	is.mu.Unlock()
	return signRaw(s.alg, s.key, s.kid, payload)
}

// Sign signs claims with any key, algorithm and kid (forgeries too).
func Sign(alg jose.SignatureAlgorithm, key any, kid string, c Claims) string {
	payload, _ := json.Marshal(c)
	return signRaw(alg, key, kid, payload)
}

func signRaw(alg jose.SignatureAlgorithm, key any, kid string, payload []byte) string {
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		panic(err)
	}
	obj, err := sg.Sign(payload)
	if err != nil {
		panic(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return out
}

// Unsigned returns an alg "none" token of claims.
func Unsigned(c Claims) string {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	p, _ := json.Marshal(c)
	return h + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// PublicRSA returns the default key's public key as PEM-free DER bytes
// of its modulus: what an HS256 forgery uses as the HMAC secret.
func (is *Issuer) PublicRSA() []byte {
	is.mu.Lock()
	defer is.mu.Unlock()
	pub := is.keys[0].pub.(*rsa.PublicKey)
	jwk := jose.JSONWebKey{Key: pub}
	b, _ := jwk.MarshalJSON()
	return b
}

// DefaultKID is the kid that signs by default.
func (is *Issuer) DefaultKID() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[0].kid
}

func (is *Issuer) discovery(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{
		"issuer": is.URL, "jwks_uri": is.URL + "/jwks", "userinfo_endpoint": is.URL + "/userinfo",
		"authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

func (is *Issuer) jwks(w http.ResponseWriter, r *http.Request) {
	is.jwksHit.Add(1)
	is.mu.Lock()
	set := jose.JSONWebKeySet{}
	for _, s := range is.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: s.pub, KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"})
	}
	is.mu.Unlock()
	writeJSON(w, set)
}

// userinfo answers the claims SetUser gave the token's sub; a token this
// issuer did not sign is a 401.
func (is *Issuer) userinfo(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sub, ok := is.subject(tok)
	if !ok {
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	is.mu.Lock()
	out := map[string]any{"sub": sub}
	for k, v := range is.users[sub] {
		out[k] = v
	}
	is.mu.Unlock()
	writeJSON(w, out)
}

// subject verifies tok against the published keys.
func (is *Issuer) subject(tok string) (string, bool) {
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return "", false
	}
	is.mu.Lock()
	keys := append([]signer(nil), is.keys...)
	is.mu.Unlock()
	for _, s := range keys {
		if p, err := jws.Verify(s.pub); err == nil {
			var c struct {
				Sub string `json:"sub"`
			}
			_ = json.Unmarshal(p, &c)
			return c.Sub, true
		}
	}
	return "", false
}

// authorize is the login page: GET shows a form (the user's name,
// prefilled with SetLogin's, and the request's parameters), POST signs
// that user in and sends the browser back with a code.
func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		_ = r.ParseForm()
	}
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	if q.Get("client_id") != is.ClientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	is.mu.Lock()
	login := is.login
	is.mu.Unlock()
	if r.Method != http.MethodPost {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginPage.Execute(w, map[string]any{"Login": login, "Params": q})
		return
	}
	is.mu.Lock()
	code := fmt.Sprintf("code-%d", time.Now().UnixNano())
	is.codes[code] = grant{sub: q.Get("username"), nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	is.mu.Unlock()
	u, _ := url.Parse(q.Get("redirect_uri"))
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	is.mu.Lock()
	g, found := is.codes[r.PostForm.Get("code")]
	delete(is.codes, r.PostForm.Get("code"))
	claims := is.users[g.sub]
	is.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if id != is.ClientID || secret != is.ClientSecret || !found || r.PostForm.Get("grant_type") != "authorization_code" ||
		r.PostForm.Get("redirect_uri") != g.redirect || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	at := is.Std(g.sub, is.Audience, 5*time.Minute)
	idt := is.Std(g.sub, is.ClientID, 5*time.Minute)
	idt["nonce"] = g.nonce
	is.mu.Lock()
	if is.nonce != "" {
		idt["nonce"] = is.nonce
	}
	is.mu.Unlock()
	for k, v := range claims {
		at[k], idt[k] = v, v
	}
	writeJSON(w, map[string]any{"access_token": is.Mint(at), "id_token": is.Mint(idt), "token_type": "Bearer", "expires_in": 300})
}

// loginPage is the IdP's sign-in form.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Test IdP sign-in</title></head>
<body><form method="post" action="/authorize" id="idp-login">
{{range $k, $v := .Params}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">
{{end}}<label for="username">User</label> <input id="username" name="username" value="{{.Login}}">
<button type="submit" id="idp-submit">Sign in</button>
</form></body></html>`))

// Approve signs sub in at authURL (the authorization request a client
// redirected to) as the login page's form would, and returns the
// redirect back to the client (with code and state), for tests without
// a browser.
func (is *Issuer) Approve(authURL, sub string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", err
	}
	form := u.Query()
	form.Set("username", sub)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(is.URL+"/authorize", form)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("the IdP answered %d", resp.StatusCode)
	}
	return resp.Header.Get("Location"), nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
