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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"golang.org/x/oauth2/jwt"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
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

// GoogleTokenURL is the default token_uri policy: only Google's HTTPS
// token endpoints. The service account JSON may come from a client's
// inline config, so without a policy token_uri would let a client make the
// gateway POST to any internal address.
func GoogleTokenURL(u *url.URL) bool {
	host := u.Hostname()
	return u.Scheme == "https" && (host == "oauth2.googleapis.com" || host == "accounts.google.com" ||
		strings.HasSuffix(host, ".googleapis.com"))
}

var tokenURLPolicy atomic.Pointer[func(*url.URL) bool]

// SetTokenURLPolicy replaces the check applied to a service account's
// token_uri and returns the previous one. Tests use it to reach a fake
// token endpoint; operators with a private token endpoint may too.
func SetTokenURLPolicy(allow func(*url.URL) bool) (previous func(*url.URL) bool) {
	if allow == nil {
		allow = GoogleTokenURL
	}
	if old := tokenURLPolicy.Swap(&allow); old != nil {
		return *old
	}
	return GoogleTokenURL
}

func tokenURLAllowed(u *url.URL) bool {
	if p := tokenURLPolicy.Load(); p != nil {
		return (*p)(u)
	}
	return GoogleTokenURL(u)
}

var tokenClient = &http.Client{Timeout: tokenTimeout}

// tokens caches one token source per service account, keyed by the
// SHA-256 of its JSON so the key itself is never a map key or log field.
// It lives in the provider value, which is registered once per process:
// cached tokens therefore survive Caddy config reloads, and a token is
// fetched once per service account and refreshed shortly before it
// expires, never per request.
type tokens struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*account
	order   [][sha256.Size]byte // insertion order, for eviction
}

type account struct {
	src       oauth2.TokenSource
	projectID string
}

// fetcher fetches a fresh token on every call; the ReuseTokenSource
// around it decides when that is needed. (jwt.Config's own TokenSource
// caches too, but refreshes only seconds before expiry.)
type fetcher struct{ cfg *jwt.Config }

// Token implements oauth2.TokenSource.
func (f fetcher) Token() (*oauth2.Token, error) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, tokenClient)
	return f.cfg.TokenSource(ctx).Token()
}

// token returns an access token for the service account and the project
// id the account names.
func (t *tokens) token(saJSON []byte) (string, string, error) {
	saJSON = unquote(saJSON)
	key := sha256.Sum256(saJSON)
	t.mu.Lock()
	a := t.entries[key]
	if a == nil {
		var err error
		if a, err = newAccount(saJSON); err != nil {
			t.mu.Unlock()
			return "", "", err
		}
		t.add(key, a)
	}
	t.mu.Unlock()
	tok, err := a.src.Token()
	if err != nil {
		return "", "", tokenError(err)
	}
	return tok.AccessToken, a.projectID, nil
}

func (t *tokens) add(key [sha256.Size]byte, a *account) {
	if t.entries == nil {
		t.entries = make(map[[sha256.Size]byte]*account)
	}
	if len(t.order) >= maxAccounts {
		delete(t.entries, t.order[0])
		t.order = t.order[1:]
	}
	t.entries[key] = a
	t.order = append(t.order, key)
}

func newAccount(saJSON []byte) (*account, error) {
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
	u, err := url.Parse(cfg.TokenURL)
	if err != nil || !tokenURLAllowed(u) {
		return nil, apierror.BadRequest("cloudc_service_account_json", "the service account's token_uri is not a Google token endpoint")
	}
	f := fetcher{cfg: cfg}
	return &account{src: oauth2.ReuseTokenSourceWithExpiry(nil, f, earlyExpiry), projectID: meta.ProjectID}, nil
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
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
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
