package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"sync"
	"time"
)

// Session bounds.
const (
	// MaxSessions bounds the sessions held at once: sign-ins beyond it,
	// after expired sessions are dropped, are refused rather than growing
	// memory without bound.
	MaxSessions = 10000
	// MaxSessionsPerKey bounds the sessions of one gateway key: a key
	// signing in again past it ends its own oldest session, so no key
	// can fill the table (MaxSessions) and lock everyone else out.
	MaxSessionsPerKey = 20
	// DefaultSessionTTL is how long a session lasts after sign-in.
	DefaultSessionTTL = 8 * time.Hour
	// maxFlash bounds a message carried to the next page.
	maxFlash = 4096
)

// errTooManySessions is returned by create when the store is full.
var errTooManySessions = errors.New("too many console sessions")

// keyID names a gateway key in the session store's indexes without
// keeping another copy of it: its SHA-256.
type keyID [sha256.Size]byte

func keyIDOf(key string) keyID { return sha256.Sum256([]byte(key)) }

// session is one signed-in browser. The gateway key lives only here, in
// server memory: the cookie holds a random id, never the key.
type session struct {
	key     string
	kid     keyID
	csrf    string
	expires time.Time
	// secret is a newly created or rotated key to show once on the next
	// keys page, then forgotten.
	secret     string
	secretName string
	// flash is a message for the next page (an API error of a write).
	flash string
}

// sessions holds the console's sessions and its sign-in throttle. It
// lives in a caddy.UsagePool, so a config reload keeps everyone signed
// in and keeps counting their sign-ins.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
	// byKey lists each key's live session ids, oldest first (at most
	// MaxSessionsPerKey).
	byKey map[keyID][]string
	// signins throttles sign-in attempts (signin_throttle.go).
	signins *signinThrottle
	// pending are the sign-ins begun at the identity provider, by
	// state (oidc.go).
	pending map[string]pendingSignIn
	// now is time.Now outside tests.
	now func() time.Time
}

func newSessions() *sessions {
	return &sessions{m: make(map[string]*session), byKey: make(map[keyID][]string), signins: newSigninThrottle(),
		pending: make(map[string]pendingSignIn), now: time.Now}
}

// Destruct lets the store live in a caddy.UsagePool.
func (s *sessions) Destruct() error { return nil }

// randomToken is 32 random bytes, base64url: unguessable session ids and
// CSRF tokens.
func randomToken() string {
	var b [32]byte
	// crypto/rand.Read never returns an error (Go 1.24+).
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for key lasting ttl and returns its id. A key
// already holding MaxSessionsPerKey sessions loses its oldest.
func (s *sessions) create(key string, ttl time.Duration) (string, *session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	kid := keyIDOf(key)
	if ids := s.byKey[kid]; len(ids) >= MaxSessionsPerKey {
		// remove copies the list it changes, so ids stays as it was.
		for _, old := range ids[:len(ids)-MaxSessionsPerKey+1] {
			s.remove(old)
		}
	}
	if len(s.m) >= MaxSessions {
		for id, v := range s.m {
			if !now.Before(v.expires) {
				s.remove(id)
			}
		}
		if len(s.m) >= MaxSessions {
			return "", nil, errTooManySessions
		}
	}
	id := randomToken()
	v := &session{key: key, kid: kid, csrf: randomToken(), expires: now.Add(ttl)}
	s.m[id] = v
	s.byKey[kid] = append(s.byKey[kid], id)
	return id, v, nil
}

// remove deletes session id and its place in byKey. The caller holds mu.
func (s *sessions) remove(id string) {
	v, ok := s.m[id]
	if !ok {
		return
	}
	delete(s.m, id)
	ids := s.byKey[v.kid]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(s.byKey, v.kid)
	} else {
		s.byKey[v.kid] = ids
	}
}

// get returns a copy of the live session id names, or false. The copy
// lets a page render without holding the lock.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(v.expires) {
		s.remove(id)
		return session{}, false
	}
	return *v, true
}

// take returns and clears the session's one-time secret and flash.
func (s *sessions) take(id string) (secret, name, flash string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[id]; ok {
		secret, name, flash = v.secret, v.secretName, v.flash
		v.secret, v.secretName, v.flash = "", "", ""
	}
	return secret, name, flash
}

// setSecret keeps a new key's secret for the next page only.
func (s *sessions) setSecret(id, name, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[id]; ok {
		v.secret, v.secretName = secret, name
	}
}

// setFlash keeps a message for the next page.
func (s *sessions) setFlash(id, msg string) {
	if len(msg) > maxFlash {
		msg = msg[:maxFlash]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[id]; ok {
		v.flash = msg
	}
}

// drop ends a session.
func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(id)
}

// validCSRF reports, in constant time, whether token is the session's.
func validCSRF(v *session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(v.csrf), []byte(token)) == 1
}
