package logfilter

import (
	"maps"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// maxClassified bounds the remembered header names.
const maxClassified = 1024

// class is what a header name says about masking its values.
type class uint8

const (
	classPlain      class = iota + 1 // logged as is
	classSecret                      // always masked
	classConfig                      // masked unless an id (an inline config can hold keys)
	classCustomHost                  // masked when the URL carries user info
)

// masks reports whether the header name (with its values) must be hidden.
func (s *Secrets) masks(name string, values []string) bool {
	switch s.classOf(name) {
	case classSecret:
		return true
	case classConfig:
		// A saved config id is harmless and useful in the log; an inline
		// JSON config can hold a provider api_key.
		for _, v := range values {
			if !apierror.IDShaped(v) {
				return true
			}
		}
	case classCustomHost:
		// A URL's user info is a credential.
		for _, v := range values {
			if strings.Contains(v, "@") {
				return true
			}
		}
	}
	return false
}

// classOf returns the class of a header name, remembered after the first
// time it is seen.
func (s *Secrets) classOf(name string) class {
	// Without extra names (which can turn any name secret), the headers
	// of a typical request and response are known without hashing the
	// name.
	if len(s.extra) == 0 {
		if c := commonClass(name); c != 0 {
			return c
		}
	}
	if s.classes == nil {
		return s.classify(name) // not provisioned
	}
	m := s.classes.Load()
	if m != nil {
		if c, ok := (*m)[name]; ok {
			return c
		}
	}
	c := s.classify(name)
	if m == nil || len(*m) < maxClassified {
		next := make(map[string]class, 1+lenOf(m))
		if m != nil {
			maps.Copy(next, *m)
		}
		next[name] = c
		// A concurrent writer may win; its map lacks this name, which is
		// then classified again next time. Nothing is lost but work.
		s.classes.CompareAndSwap(m, &next)
	}
	return c
}

func lenOf(m *map[string]class) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// commonClass is the class classify gives the canonical names of the
// headers of a typical gateway request and response, or 0 for another
// name. TestCommonClass checks that the two agree.
func commonClass(name string) class {
	switch name {
	case "Accept", "Accept-Encoding", "Cache-Control", "Connection", "Content-Encoding", "Content-Length",
		"Content-Type", "Date", "Server", "Transfer-Encoding", "User-Agent", "Vary", "Via",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id",
		"X-Gateway-Cache-Status", "X-Gateway-Cost", "X-Gateway-Last-Used-Option-Index",
		"X-Gateway-Provider", "X-Gateway-Retry-Attempt-Count", "X-Gateway-Trace-Id":
		return classPlain
	case "Authorization", "Cookie", "Proxy-Authorization", "Set-Cookie", "X-Api-Key",
		"X-Gateway-Api-Key", "X-Portkey-Api-Key":
		return classSecret
	case "X-Gateway-Config", "X-Portkey-Config":
		return classConfig
	case "X-Gateway-Custom-Host", "X-Portkey-Custom-Host":
		return classCustomHost
	}
	return 0
}

// classify works out the class of a header name.
func (s *Secrets) classify(name string) class {
	n := strings.ToLower(name)
	if s.extra[n] || Sensitive(n) {
		return classSecret
	}
	g, ok := strings.CutPrefix(n, "x-gateway-")
	if !ok {
		g, ok = strings.CutPrefix(n, "x-portkey-")
	}
	switch {
	case ok && g == config:
		return classConfig
	case ok && g == customHost:
		return classCustomHost
	}
	return classPlain
}

// Gateway headers (without prefix) that are credentials by their form.
const (
	config     = "config"
	customHost = "custom-host"
)

// exact are credential headers whose names the generic rules in Sensitive
// would not catch.
var exact = map[string]bool{
	"x-goog-api-key":                        true,
	"x-amz-security-token":                  true,
	"x-gateway-clouda-access-key-id":        true,
	"x-portkey-clouda-access-key-id":        true,
	"x-gateway-cloudc-service-account-json": true,
	"x-portkey-cloudc-service-account-json": true,
}

// fragments mark a header name as carrying a secret wherever they appear.
// "auth" covers authorization, proxy-authorization and x-auth-*; "api-key"
// covers x-api-key, api-key and the gateway key under both prefixes.
var fragments = []string{
	"auth", "api-key", "apikey", "api_key", "access-key", "private-key",
	"secret", "token", "password", "passwd", "credential", "cookie", "session",
	"signature",
}

// Sensitive reports whether a header name (lower case) always carries a
// credential, whatever its value.
func Sensitive(lower string) bool {
	if exact[lower] {
		return true
	}
	for _, f := range fragments {
		if strings.Contains(lower, f) {
			return true
		}
	}
	return false
}

// SensitiveName is Sensitive for a header name in any case (as Go
// canonicalises it), lower-cased on the stack: a caller may ask it for
// every header of every request without allocating.
func SensitiveName(name string) bool {
	var buf [64]byte
	if len(name) > len(buf) {
		return Sensitive(strings.ToLower(name))
	}
	b := buf[:len(name)]
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return Sensitive(string(b))
}
