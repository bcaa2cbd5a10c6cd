// Package logfilter provides the `llm_secrets` log field filter: applied to
// a header field of a Caddy log (the access log's request>headers, or the
// reverse proxy's), it masks every header that can carry a credential the
// gateway reads, under both the x-gateway-* and x-portkey-* prefixes.
//
// Caddy records the request for its access log before any handler runs and
// hides only Authorization, Proxy-Authorization and Cookie, so the gateway
// itself cannot scrub the other credential headers there. One line in the
// Caddyfile does:
//
//	log {
//		format filter {
//			wrap json
//			fields {
//				request>headers llm_secrets
//			}
//		}
//	}
package logfilter

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Redacted replaces the values of a masked header, as Caddy's own
// Authorization masking does.
const Redacted = "REDACTED"

func init() {
	caddy.RegisterModule(Secrets{})
}

// Secrets is the `llm_secrets` log field filter. It masks, in a header
// object, the gateway API key, provider credentials (Authorization,
// x-api-key, api-key, x-goog-api-key, x-amz-security-token), the cloud
// credential headers, inline configs (which can hold api keys) and any
// header whose name says it carries a secret (…token, …secret,
// …password, …credential, …auth…, …api-key, …access-key, cookies).
// Headers not masked are logged unchanged.
type Secrets struct {
	// Headers names further headers to mask (any case).
	Headers []string `json:"headers,omitempty"`

	extra map[string]bool
	// classes remembers the class of each header name seen (header names
	// repeat from request to request, and classifying one scans it for
	// every fragment). Copy on write, read without locks or allocation;
	// at most maxClassified names, so random names cannot grow it.
	classes *atomic.Pointer[map[string]class]
}

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

// CaddyModule returns the Caddy module information.
func (Secrets) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.filter.llm_secrets",
		New: func() caddy.Module { return new(Secrets) },
	}
}

// Provision indexes the extra header names.
func (s *Secrets) Provision(caddy.Context) error {
	s.index()
	return nil
}

func (s *Secrets) index() {
	s.classes = new(atomic.Pointer[map[string]class])
	s.extra = make(map[string]bool, len(s.Headers))
	for _, h := range s.Headers {
		s.extra[strings.ToLower(strings.TrimSpace(h))] = true
	}
}

// UnmarshalCaddyfile sets up the filter from Caddyfile tokens:
//
//	<field> llm_secrets [<extra header>...]
func (s *Secrets) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the filter name
	s.Headers = append(s.Headers, d.RemainingArgs()...)
	if d.NextBlock(d.Nesting()) {
		return d.Err("llm_secrets takes no block: list extra header names as arguments")
	}
	return nil
}

// Filter masks the credential headers of a header field. Caddy logs
// headers as an object (caddyhttp.LoggableHTTPHeader); a plain http.Header
// logged by reflection is masked too. Any other field passes unchanged.
func (s *Secrets) Filter(in zapcore.Field) zapcore.Field {
	switch v := in.Interface.(type) {
	case zapcore.ObjectMarshaler:
		in.Interface = maskedObject{inner: v, s: s}
	case http.Header:
		in.Interface = s.maskHeader(v)
	}
	return in
}

// maskHeader returns a copy of h with the credential values replaced.
func (s *Secrets) maskHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if s.masks(k, vs) {
			vs = []string{Redacted}
		}
		out[k] = vs
	}
	return out
}

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

// maskedObject logs a header object through maskEncoder.
type maskedObject struct {
	inner zapcore.ObjectMarshaler
	s     *Secrets
}

func (m maskedObject) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return m.inner.MarshalLogObject(maskEncoder{ObjectEncoder: enc, s: m.s})
}

// maskEncoder sits between a header object and the log encoder and
// replaces the values of credential headers. Caddy writes each header as
// an array of strings; other shapes are masked as a single string.
type maskEncoder struct {
	zapcore.ObjectEncoder
	s *Secrets
}

// AddArray masks a header written as an array of values. Sensitive names
// are masked without reading the values; for the others the values are
// read first, since some (inline configs, URLs with user info) are
// credentials by their form.
func (m maskEncoder) AddArray(key string, arr zapcore.ArrayMarshaler) error {
	switch m.s.classOf(key) {
	case classSecret:
		return m.ObjectEncoder.AddArray(key, redactedArray{})
	case classPlain:
		return m.ObjectEncoder.AddArray(key, arr)
	}
	tmp := zapcore.NewMapObjectEncoder()
	if err := tmp.AddArray(key, arr); err != nil {
		return err
	}
	elems, _ := tmp.Fields[key].([]any)
	vals := make(stringArray, 0, len(elems))
	for _, e := range elems {
		if s, ok := e.(string); ok {
			vals = append(vals, s)
		} else {
			vals = append(vals, fmt.Sprint(e))
		}
	}
	if m.s.masks(key, vals) {
		return m.ObjectEncoder.AddArray(key, redactedArray{})
	}
	return m.ObjectEncoder.AddArray(key, vals)
}

func (m maskEncoder) AddString(key, v string) {
	if m.s.masks(key, []string{v}) {
		v = Redacted
	}
	m.ObjectEncoder.AddString(key, v)
}

func (m maskEncoder) AddByteString(key string, v []byte) {
	if m.s.masks(key, []string{string(v)}) {
		m.ObjectEncoder.AddString(key, Redacted)
		return
	}
	m.ObjectEncoder.AddByteString(key, v)
}

func (m maskEncoder) AddReflected(key string, v any) error {
	if m.s.masks(key, nil) {
		m.ObjectEncoder.AddString(key, Redacted)
		return nil
	}
	return m.ObjectEncoder.AddReflected(key, v)
}

func (m maskEncoder) AddObject(key string, v zapcore.ObjectMarshaler) error {
	if m.s.masks(key, nil) {
		m.ObjectEncoder.AddString(key, Redacted)
		return nil
	}
	return m.ObjectEncoder.AddObject(key, v)
}

type redactedArray struct{}

func (redactedArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	enc.AppendString(Redacted)
	return nil
}

type stringArray []string

func (a stringArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, s := range a {
		enc.AppendString(s)
	}
	return nil
}

// Interface guards.
var (
	_ logging.LogFieldFilter = (*Secrets)(nil)
	_ caddy.Provisioner      = (*Secrets)(nil)
	_ caddyfile.Unmarshaler  = (*Secrets)(nil)
)
