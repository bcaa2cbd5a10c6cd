package logfilter

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap/zapcore"
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
		in.Interface = &maskedObject{inner: v, s: s}
	case http.Header:
		in.Interface = s.maskHeader(v)
	}
	return in
}

// Interface guards.
var (
	_ logging.LogFieldFilter = (*Secrets)(nil)
	_ caddy.Provisioner      = (*Secrets)(nil)
	_ caddyfile.Unmarshaler  = (*Secrets)(nil)
)
