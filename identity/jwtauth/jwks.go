package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// JWKS bounds. A token naming a kid the cache lacks triggers a refetch
// (the IdP rotated its keys), but refetches share one small bucket, so a
// flood of tokens with made-up kids costs the IdP at most RefetchBurst
// requests at once and one every RefetchEvery after; a kid still absent
// after a fetch is refused without asking again until the next one.
const (
	// RefetchBurst is how many fetches may follow one another at once.
	RefetchBurst = 3
	// RefetchEvery is how often the bucket gains a fetch back.
	RefetchEvery = 10 * time.Second
	// KeysMaxAge is how long a fetched key set is used before it is
	// fetched again (on the next request: a failed refresh keeps the
	// old keys).
	KeysMaxAge = time.Hour
	// MaxDocumentBytes bounds every document read from the IdP
	// (discovery, JWKS, userinfo, token answers).
	MaxDocumentBytes = 1 << 20
	// FetchTimeout bounds one fetch from the IdP.
	FetchTimeout = 5 * time.Second
	// maxKeys bounds the keys kept from one JWKS.
	maxKeys = 100
)

// errUnknownKey is a token signed with no key the IdP publishes.
var errUnknownKey = errors.New("the token is signed with a key the identity provider does not publish")

// KeySet is the IdP's signing keys, fetched from its jwks_uri and cached
// (see the constants above for rotation and its bounds). It implements
// go-oidc's KeySet, so the console's ID-token verifier shares it.
type KeySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	byKID   map[string][]jose.JSONWebKey
	fetched time.Time
	// inflight is closed when the running fetch ends (nil when none).
	inflight chan struct{}
	// tokens and refilled are the refetch bucket.
	tokens   float64
	refilled time.Time
}

// NewKeySet returns the key set served at url, fetched through client.
func NewKeySet(url string, client *http.Client) *KeySet {
	return &KeySet{url: url, client: client, now: time.Now, tokens: RefetchBurst}
}

// keys returns the keys of kid ("" names every key), fetching the set
// when it lacks kid or is older than KeysMaxAge, within the bucket.
func (k *KeySet) keys(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	for attempt := 0; ; attempt++ {
		k.mu.Lock()
		got, have := k.lookup(kid)
		fresh := !k.fetched.IsZero() && k.now().Sub(k.fetched) < KeysMaxAge
		if have && fresh || attempt > 0 {
			k.mu.Unlock()
			if !have {
				return nil, errUnknownKey
			}
			return got, nil
		}
		wait := k.inflight
		if wait == nil {
			if !k.take() {
				k.mu.Unlock()
				if have {
					return got, nil // stale but usable
				}
				return nil, errUnknownKey
			}
			wait = make(chan struct{})
			k.inflight = wait
			k.mu.Unlock()
			// The fetch is not the request's to cancel: other requests
			// wait on it too.
			set, err := k.fetch(context.WithoutCancel(ctx))
			k.mu.Lock()
			if err == nil {
				k.byKID, k.fetched = set, k.now()
			}
			k.inflight = nil
			close(wait)
			k.mu.Unlock()
			continue
		}
		k.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// lookup reads the cache. The caller holds mu.
func (k *KeySet) lookup(kid string) ([]jose.JSONWebKey, bool) {
	if kid == "" {
		var all []jose.JSONWebKey
		for _, ks := range k.byKID {
			all = append(all, ks...)
		}
		return all, len(all) > 0
	}
	ks, ok := k.byKID[kid]
	return ks, ok
}

// take spends a fetch from the bucket. The caller holds mu.
func (k *KeySet) take() bool {
	now := k.now()
	if !k.refilled.IsZero() {
		k.tokens += float64(now.Sub(k.refilled)) / float64(RefetchEvery)
		if k.tokens > RefetchBurst {
			k.tokens = RefetchBurst
		}
	}
	k.refilled = now
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

// fetch reads the JWKS: public signing keys only (a symmetric "oct" key
// is never one a token may be checked against).
func (k *KeySet) fetch(ctx context.Context) (map[string][]jose.JSONWebKey, error) {
	body, err := getDocument(ctx, k.client, k.url, "")
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("jwks: %v", err)
	}
	out := make(map[string][]jose.JSONWebKey)
	n := 0
	for _, key := range set.Keys {
		if !key.Valid() || !key.IsPublic() || key.Use != "" && key.Use != "sig" || n == maxKeys {
			continue
		}
		out[key.KeyID] = append(out[key.KeyID], key)
		n++
	}
	return out, nil
}

// VerifySignature implements go-oidc's KeySet: it checks jwt's signature
// against the key its kid names and returns the payload.
func (k *KeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, defaultAlgorithms)
	if err != nil {
		return nil, err
	}
	return k.verify(ctx, jws)
}

// verify checks jws's one signature and returns its payload. A key that
// declares its algorithm is used with that algorithm only.
func (k *KeySet) verify(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must carry exactly one signature")
	}
	h := jws.Signatures[0].Header
	keys, err := k.keys(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if key.Algorithm != "" && key.Algorithm != h.Algorithm {
			continue
		}
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("the token's signature does not verify")
}

// getDocument GETs a JSON object from the IdP, bounded in size and time,
// with bearer as the Authorization token when set.
func getDocument(ctx context.Context, client *http.Client, url, bearer string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{url: url, status: resp.StatusCode}
	}
	if len(body) > MaxDocumentBytes {
		return nil, fmt.Errorf("%s answered more than %d bytes", url, MaxDocumentBytes)
	}
	if err := jsonlimit.Object(body); err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	return body, nil
}

// statusError is an IdP answer other than 200.
type statusError struct {
	url    string
	status int
}

func (e *statusError) Error() string { return fmt.Sprintf("%s answered %d", e.url, e.status) }
