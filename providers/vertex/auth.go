package vertex

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// Scope is the OAuth scope Vertex AI calls need.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

const (
	// maxAccounts bounds the cached token sources; service accounts
	// beyond it evict the oldest, whose next request fetches anew.
	maxAccounts = 64
	// earlyExpiry refreshes a token this long before it expires, so no
	// request leaves with a token about to lapse in flight.
	earlyExpiry = 2 * time.Minute
	// tokenTimeout bounds one token fetch.
	tokenTimeout = 30 * time.Second
)

// tokens caches one token source per service account, keyed by the
// SHA-256 of its JSON so the key itself is never a map key or log field,
// and by whether the account came from client input (guarded), so an
// account a client sent never shares a token source with an operator's.
// It lives in the provider value, which is registered once per process:
// cached tokens therefore survive Caddy config reloads, and a token is
// fetched once per service account and refreshed shortly before it
// expires, never per request.
type tokens struct {
	mu      sync.Mutex
	entries map[accountKey]*account
	order   []accountKey // insertion order, for eviction
}

type accountKey struct {
	sum     [sha256.Size]byte
	guarded bool
}

type account struct {
	src       oauth2.TokenSource
	projectID string
	// egress is the dialer of the latest request that used a guarded
	// account: the token endpoint (token_uri, from client input) is
	// reached only under the gateway's current egress policy.
	egress atomic.Pointer[providers.Dialer]
	// blocked records that the egress policy refused the token endpoint
	// during the running fetch: oauth2 flattens transport errors into
	// text, so the refusal is carried beside it.
	blocked atomic.Bool
	// unreachable records a transport failure of the running fetch.
	unreachable atomic.Bool
}

// recorder notes on its account how a token fetch failed, which oauth2
// would otherwise flatten into text.
type recorder struct {
	base http.RoundTripper
	a    *account
}

// RoundTrip implements http.RoundTripper.
func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		if errors.Is(err, upstream.ErrBlocked) {
			r.a.blocked.Store(true)
		} else {
			r.a.unreachable.Store(true)
		}
	}
	return resp, err
}

// fetcher fetches a fresh token on every call; the ReuseTokenSource
// around it decides when that is needed. (jwt.Config's own TokenSource
// caches too, but refreshes only seconds before expiry.)
type fetcher struct {
	cfg    *jwt.Config
	client *http.Client
	a      *account
}

// Token implements oauth2.TokenSource. ReuseTokenSource calls it under
// its own lock, so fetches of one account never overlap.
func (f fetcher) Token() (*oauth2.Token, error) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, f.client)
	f.a.blocked.Store(false)
	f.a.unreachable.Store(false)
	tok, err := f.cfg.TokenSource(ctx).Token()
	switch {
	case err == nil:
	case f.a.blocked.Load():
		return nil, upstream.ErrBlocked
	case f.a.unreachable.Load():
		return nil, errUnreachable
	}
	return tok, err
}

// guardedClient returns the HTTP client of a guarded account: every
// connection is dialled by the account's current egress dialer (which
// checks the resolved address before connecting), never through an
// environment proxy, and never reused, so a policy change applies to the
// next fetch.
func guardedClient(a *account) *http.Client {
	return &http.Client{
		Timeout: tokenTimeout,
		Transport: recorder{a: a, base: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				d := a.egress.Load()
				if d == nil || *d == nil {
					return nil, errNoEgress
				}
				return (*d).DialContext(ctx, network, addr)
			},
			DisableKeepAlives:   true,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
		}},
		// A token endpoint that redirects is not followed: the redirect
		// target would be dialled by the same guard, but nothing needs it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type egressError string

func (e egressError) Error() string { return string(e) }

const (
	errNoEgress    = egressError("vertex: no egress dialer for a guarded service account")
	errUnreachable = egressError("vertex: the token endpoint could not be reached")
)

// token returns an access token for the service account and the project
// id the account names.
//
// egress, when non-nil, is the egress-policy dialer of a request whose
// service account came from client input; the token endpoint is then
// dialled only through it.
func (t *tokens) token(saJSON []byte, egress providers.Dialer) (string, string, error) {
	saJSON = unquote(saJSON)
	key := accountKey{sum: sha256.Sum256(saJSON), guarded: egress != nil}
	t.mu.Lock()
	a := t.entries[key]
	if a == nil {
		var err error
		if a, err = newAccount(saJSON, key.guarded); err != nil {
			t.mu.Unlock()
			return "", "", err
		}
		t.add(key, a)
	}
	t.mu.Unlock()
	if egress != nil {
		a.egress.Store(&egress)
	}
	tok, err := a.src.Token()
	if err != nil {
		return "", "", tokenError(err)
	}
	return tok.AccessToken, a.projectID, nil
}

func (t *tokens) add(key accountKey, a *account) {
	if t.entries == nil {
		t.entries = make(map[accountKey]*account)
	}
	if len(t.order) >= maxAccounts {
		delete(t.entries, t.order[0])
		t.order = t.order[1:]
	}
	t.entries[key] = a
	t.order = append(t.order, key)
}

func newAccount(saJSON []byte, guarded bool) (*account, error) {
	var meta struct {
		ProjectID string `json:"project_id"`
	}
	if err := json.Unmarshal(saJSON, &meta); err != nil {
		return nil, apierror.BadRequest("cloudc_service_account_json", "cloudc_service_account_json is not a JSON object")
	}
	cfg, err := google.JWTConfigFromJSON(saJSON, Scope)
	if err != nil {
		return nil, apierror.BadRequest("cloudc_service_account_json", "cloudc_service_account_json is not a service account key")
	}
	if cfg.TokenURL == "" {
		cfg.TokenURL = google.JWTTokenURL
	}
	// token_uri is honoured as Google's libraries do (other universes,
	// private endpoints); what it may reach is the egress policy's call,
	// made when the fetch dials.
	u, err := url.Parse(cfg.TokenURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, apierror.BadRequest("cloudc_service_account_json", "the service account's token_uri is not an http(s) URL")
	}
	a := &account{projectID: meta.ProjectID}
	f := fetcher{cfg: cfg, client: &http.Client{Timeout: tokenTimeout, Transport: recorder{base: http.DefaultTransport, a: a}}, a: a}
	if guarded {
		f.client = guardedClient(a)
	}
	a.src = oauth2.ReuseTokenSourceWithExpiry(nil, f, earlyExpiry)
	return a, nil
}

// tokenError maps a failed token fetch without quoting the response,
// which came from an endpoint the client's JSON named.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "Google refused the service account's token request"
		if code := oauthCode(re); code != "" {
			msg += " (" + code + ")"
		}
		return apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, msg).WithCode("invalid_service_account")
	}
	if errors.As(err, new(*upstream.BlockedError)) {
		return upstream.Refusal()
	}
	var ne net.Error
	var ue *url.Error
	if errors.Is(err, errUnreachable) || errors.As(err, &ne) || errors.As(err, &ue) {
		return apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "could not reach Google's token endpoint for the service account").WithCode("upstream_unreachable")
	}
	return apierror.BadRequest("cloudc_service_account_json", "the service account key could not be used to sign a token request")
}

// oauthCode returns the OAuth error code of a refused token request
// (invalid_grant, …). Only a short lower-case code is returned, so the
// message cannot carry other content of the response.
func oauthCode(re *oauth2.RetrieveError) string {
	code := re.ErrorCode
	if code == "" {
		var body struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(re.Body, &body)
		code = body.Error
	}
	if len(code) == 0 || len(code) > 40 {
		return ""
	}
	for _, c := range code {
		if (c < 'a' || c > 'z') && c != '_' {
			return ""
		}
	}
	return code
}

// unquote accepts a service account given as a JSON string holding the
// JSON (as some configs store it).
func unquote(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if json.Unmarshal(b, &s) == nil {
			return []byte(s)
		}
	}
	return b
}
