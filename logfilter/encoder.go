package logfilter

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/logging"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(Encoder{})
}

// Encoder is the `llm_secrets` log encoder: it wraps another encoder (json
// by default) and masks the credential headers of every header object it
// meets, the way the `llm_secrets` field filter does (same rules, same
// code), without Caddy's `format filter` encoder. Caddyfile syntax:
//
//	format llm_secrets {
//		wrap <encoder> [<encoder options>]
//		headers <extra header>...
//	}
//
// Both subdirectives are optional; `format llm_secrets` alone masks into
// plain JSON. `headers` may repeat.
//
// A header object is an object field named "headers" or ending in
// "_headers", at any depth and inside arrays: Caddy's access log request
// headers (request>headers) and response headers (resp_headers), the
// reverse proxy DEBUG lines' upstream request (request>headers) and
// response (headers), the admin API's request headers. `format filter`
// builds a key path string and looks it up in a map for every field of
// every entry (including the request Caddy encodes into every log core at
// the start of a request); this encoder hands scalar fields straight to
// the wrapped encoder and intercepts only objects and arrays, with nodes
// from a pool (no allocation per object), and writes Caddy's header
// objects itself, with fewer allocations than Caddy's own marshaler.
type Encoder struct {
	// WrappedRaw is the encoder that writes the entries, as a module
	// object ("format" names it). Default: json.
	WrappedRaw json.RawMessage `json:"wrap,omitempty" caddy:"namespace=caddy.logging.encoders inline_key=format"`

	// Headers names further headers to mask (any case).
	Headers []string `json:"headers,omitempty"`

	// redactor is what runs once provisioned; its methods are the
	// encoder's. It holds the wrapped encoder and the masking rules.
	redactor `json:"-"`

	wrappedIsDefault bool
}

// CaddyModule returns the Caddy module information.
func (Encoder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.logging.encoders.llm_secrets",
		New: func() caddy.Module { return new(Encoder) },
	}
}

// Provision loads the wrapped encoder (json when none is configured) and
// indexes the extra header names.
func (e *Encoder) Provision(ctx caddy.Context) error {
	if e.WrappedRaw == nil {
		je := &logging.JSONEncoder{}
		if err := je.Provision(ctx); err != nil {
			return fmt.Errorf("provisioning default json encoder: %v", err)
		}
		e.redactor.Encoder = je
		e.wrappedIsDefault = true
	} else {
		val, err := ctx.LoadModule(e, "WrappedRaw")
		if err != nil {
			return fmt.Errorf("loading wrapped encoder module: %v", err)
		}
		e.redactor.Encoder = val.(zapcore.Encoder)
	}
	e.s = &Secrets{Headers: e.Headers}
	e.s.index()
	return nil
}

// ConfigureDefaultFormat passes the writer on to a configured wrapped
// encoder that picks its own default by it (a nested `format filter`
// without `wrap`, say). The default wrapped encoder stays json whatever
// the writer: the point of this encoder is a machine-read log.
func (e *Encoder) ConfigureDefaultFormat(wo caddy.WriterOpener) error {
	if e.wrappedIsDefault {
		return nil
	}
	if cfd, ok := e.redactor.Encoder.(caddy.ConfiguresFormatterDefault); ok {
		return cfd.ConfigureDefaultFormat(wo)
	}
	return nil
}

// UnmarshalCaddyfile sets up the encoder from Caddyfile tokens:
//
//	llm_secrets {
//		wrap <encoder> [<encoder options>]
//		headers <extra header>...
//	}
func (e *Encoder) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the encoder name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "wrap":
			if e.WrappedRaw != nil {
				return d.Err("wrap given twice")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			name := d.Val()
			id := "caddy.logging.encoders." + name
			unm, err := caddyfile.UnmarshalModule(d, id)
			if err != nil {
				return err
			}
			enc, ok := unm.(zapcore.Encoder)
			if !ok {
				return d.Errf("module %s (%T) is not a zapcore.Encoder", id, unm)
			}
			e.WrappedRaw = caddyconfig.JSONModuleObject(enc, "format", name, nil)
		case "headers":
			names := d.RemainingArgs()
			if len(names) == 0 {
				return d.ArgErr()
			}
			e.Headers = append(e.Headers, names...)
		default:
			return d.Errf("unknown llm_secrets subdirective %q (want wrap or headers)", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ zapcore.Encoder                  = (*Encoder)(nil)
	_ caddy.Provisioner                = (*Encoder)(nil)
	_ caddy.ConfiguresFormatterDefault = (*Encoder)(nil)
	_ caddyfile.Unmarshaler            = (*Encoder)(nil)
)
