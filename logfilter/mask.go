package logfilter

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap/zapcore"
)

// maskedObject logs a header object with the values of its credential
// headers replaced. It is both the marshaler handed to the log encoder and
// the encoder handed to the header object: MarshalLogObject records the
// real encoder in the embedded ObjectEncoder and passes itself on, so
// masking a header object needs one struct (from a walker's slab, or
// allocated by the field filter) instead of two (a marshaler and an
// encoder, each boxed in an interface). Every maskedObject is used for
// one field at a time and marshaled synchronously by one goroutine (zap
// encoders marshal objects inside AddObject), so setting the field is
// safe.
//
// Caddy's own header object (caddyhttp.LoggableHTTPHeader) is written by
// maskedObject itself, header by header; other header objects write to
// it. Caddy writes each header as an array of strings; other shapes are
// masked as a single string.
type maskedObject struct {
	zapcore.ObjectEncoder
	inner zapcore.ObjectMarshaler
	s     *Secrets
	// values holds the header values being written, so that handing
	// them to the encoder as an array (&values) allocates nothing.
	values stringArray
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (m *maskedObject) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if h, ok := m.inner.(caddyhttp.LoggableHTTPHeader); ok {
		return m.header(enc, h.Header)
	}
	m.ObjectEncoder = enc
	return m.inner.MarshalLogObject(m)
}

// header writes Caddy's header object itself, the way its
// MarshalLogObject does (each header an array of its values), masked.
// Caddy's own writing costs two allocations a header (the lower-case name
// it checks, the values boxed as an array); this costs none when it
// writes to zap's json encoder, which only reads the values, handing them
// on in m.values. Any other encoder (Caddy's `filter`, whose field
// filters recognise Caddy's string arrays by type) gets them as Caddy
// hands them on. The headers Caddy hides (Cookie, Set-Cookie,
// Authorization, Proxy-Authorization, unless ShouldLogCredentials) are
// credentials to this filter too, always replaced by the same
// ["REDACTED"].
func (m *maskedObject) header(enc zapcore.ObjectEncoder, h http.Header) error {
	direct := reflect.TypeOf(enc) == jsonEncoderType
	for k, vs := range h {
		var err error
		switch {
		case m.s.masks(k, vs):
			err = enc.AddArray(k, redactedArray{})
		case direct:
			m.values = vs
			err = enc.AddArray(k, &m.values)
			m.values = nil
		default:
			err = enc.AddArray(k, caddyhttp.LoggableStringArray(vs))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// jsonEncoderType is the type of zap's json encoder, which Caddy's json
// and console encoders write objects with.
var jsonEncoderType = reflect.TypeOf(zapcore.NewJSONEncoder(zapcore.EncoderConfig{}))

// AddArray masks a header written as an array of values. Sensitive names
// are masked without reading the values; for the others the values are
// read first, since some (inline configs, URLs with user info) are
// credentials by their form.
func (m *maskedObject) AddArray(key string, arr zapcore.ArrayMarshaler) error {
	switch m.s.classOf(key) {
	case classSecret:
		return m.ObjectEncoder.AddArray(key, redactedArray{})
	case classPlain:
		return m.ObjectEncoder.AddArray(key, arr)
	}
	var vals []string
	switch a := arr.(type) {
	case caddyhttp.LoggableStringArray:
		vals = a
	default:
		tmp := zapcore.NewMapObjectEncoder()
		if err := tmp.AddArray(key, arr); err != nil {
			return err
		}
		elems, _ := tmp.Fields[key].([]any)
		vals = make([]string, 0, len(elems))
		for _, e := range elems {
			if s, ok := e.(string); ok {
				vals = append(vals, s)
			} else {
				vals = append(vals, fmt.Sprint(e))
			}
		}
		arr = stringArray(vals)
	}
	if m.s.masks(key, vals) {
		return m.ObjectEncoder.AddArray(key, redactedArray{})
	}
	return m.ObjectEncoder.AddArray(key, arr)
}

// AddString masks a header written as one string.
func (m *maskedObject) AddString(key, v string) {
	if m.s.masks(key, []string{v}) {
		v = Redacted
	}
	m.ObjectEncoder.AddString(key, v)
}

// AddByteString masks a header written as bytes.
func (m *maskedObject) AddByteString(key string, v []byte) {
	if m.s.masks(key, []string{string(v)}) {
		m.ObjectEncoder.AddString(key, Redacted)
		return
	}
	m.ObjectEncoder.AddByteString(key, v)
}

// AddReflected masks a credential header written by reflection, without
// reading it.
func (m *maskedObject) AddReflected(key string, v any) error {
	if m.s.masks(key, nil) {
		m.ObjectEncoder.AddString(key, Redacted)
		return nil
	}
	return m.ObjectEncoder.AddReflected(key, v)
}

// AddObject masks a credential header written as an object, without
// reading it.
func (m *maskedObject) AddObject(key string, v zapcore.ObjectMarshaler) error {
	if m.s.masks(key, nil) {
		m.ObjectEncoder.AddString(key, Redacted)
		return nil
	}
	return m.ObjectEncoder.AddObject(key, v)
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

type redactedArray struct{}

func (redactedArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	enc.AppendString(Redacted)
	return nil
}

// stringArray logs strings as an array; a pointer to one is an
// ArrayMarshaler too, without the allocation of boxing the slice.
type stringArray []string

func (a stringArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, s := range a {
		enc.AppendString(s)
	}
	return nil
}
