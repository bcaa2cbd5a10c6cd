package console

import (
	"crypto/rand"
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
	// DefaultSessionTTL is how long a session lasts after sign-in.
	DefaultSessionTTL = 8 * time.Hour
	// maxFlash bounds a message carried to the next page.
	maxFlash = 4096
)

// errTooManySessions is returned by create when the store is full.
var errTooManySessions = errors.New("too many console sessions")

// session is one signed-in browser. The gateway key lives only here, in
// server memory: the cookie holds a random id, never the key.
type session struct {
	key     string
	csrf    string
	expires time.Time
	// secret is a newly created or rotated key to show once on the next
	// keys page, then forgotten.
	secret     string
	secretName string
	// flash is a message for the next page (an API error of a write).
	flash string
}

// sessions holds the console's sessions. It lives in a caddy.UsagePool,
// so a config reload keeps everyone signed in.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
	// now is time.Now outside tests.
	now func() time.Time
}

func newSessions() *sessions {
	return &sessions{m: make(map[string]*session), now: time.Now}
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

// create starts a session for key lasting ttl and returns its id.
func (s *sessions) create(key string, ttl time.Duration) (string, *session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= MaxSessions {
		for id, v := range s.m {
			if !now.Before(v.expires) {
				delete(s.m, id)
			}
		}
		if len(s.m) >= MaxSessions {
			return "", nil, errTooManySessions
		}
	}
	id := randomToken()
	v := &session{key: key, csrf: randomToken(), expires: now.Add(ttl)}
	s.m[id] = v
	return id, v, nil
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
		delete(s.m, id)
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
	delete(s.m, id)
}

// validCSRF reports, in constant time, whether token is the session's.
func validCSRF(v *session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(v.csrf), []byte(token)) == 1
}
