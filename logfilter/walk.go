package logfilter

import (
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// redactor is the running `llm_secrets` encoder: the wrapped encoder,
// embedded so that every scalar method (AddString, AddInt, …) is the
// wrapped encoder's own, plus the methods that can receive an object:
// AddObject, AddArray, AddReflected, and EncodeEntry for the entry's
// fields.
type redactor struct {
	zapcore.Encoder
	s *Secrets
}

// Clone returns the context zap's With adds fields to: recorded, and
// encoded through the masking only if an entry is written with it (see
// lazy.go).
func (r *redactor) Clone() zapcore.Encoder {
	return &lazyContext{parent: r, s: r.s}
}

// AddObject masks a header object and watches inside any other object.
// zap's With (and Caddy's WithLazy of the request) lands here.
func (r *redactor) AddObject(key string, m zapcore.ObjectMarshaler) error {
	return r.Encoder.AddObject(key, r.s.object(key, m))
}

// AddArray watches inside the array's objects.
func (r *redactor) AddArray(key string, a zapcore.ArrayMarshaler) error {
	return r.Encoder.AddArray(key, r.s.array(key, a))
}

// AddReflected masks an http.Header logged by reflection under a header
// key.
func (r *redactor) AddReflected(key string, v any) error {
	return r.Encoder.AddReflected(key, r.s.reflected(key, v))
}

// EncodeEntry encodes the entry's fields through the masking. zap's
// encoders add an entry's fields to a clone of their own (the inner
// encoder, not this wrapper), so the fields that can carry an object are
// wrapped here, in a copy: the caller's slice may go to other cores too.
func (r *redactor) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	first := -1
	for i := range fields {
		if r.s.wraps(&fields[i]) {
			first = i
			break
		}
	}
	if first < 0 {
		return r.Encoder.EncodeEntry(ent, fields)
	}
	p := fieldPool.Get().(*[]zapcore.Field)
	cp := append((*p)[:0], fields...)
	for i := first; i < len(cp); i++ {
		r.s.wrapField(&cp[i])
	}
	buf, err := r.Encoder.EncodeEntry(ent, cp)
	clear(cp) // the pool must not keep the entry's values alive
	if cap(cp) <= maxPooledFields {
		*p = cp[:0]
		fieldPool.Put(p)
	}
	return buf, err
}

// fieldPool holds the field copies EncodeEntry makes, so an entry with
// objects costs no allocation for its fields slice.
var fieldPool = sync.Pool{New: func() any { return new([]zapcore.Field) }}

// maxPooledFields bounds the slices kept in fieldPool.
const maxPooledFields = 64

// headerKey reports whether an object under key is a header object:
// Caddy's "headers" (request, upstream response, admin request),
// "resp_headers", "push_headers".
func headerKey(key string) bool {
	return key == "headers" || strings.HasSuffix(key, "_headers")
}

// wraps reports whether wrapField would change f.
func (s *Secrets) wraps(f *zapcore.Field) bool {
	switch f.Type {
	case zapcore.ObjectMarshalerType, zapcore.InlineMarshalerType, zapcore.ArrayMarshalerType:
		return true
	case zapcore.ReflectType:
		_, ok := f.Interface.(http.Header)
		return ok && headerKey(f.Key)
	}
	return false
}

// wrapField puts the masking between an entry field and the encoder.
func (s *Secrets) wrapField(f *zapcore.Field) {
	switch f.Type {
	case zapcore.ObjectMarshalerType:
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			f.Interface = s.object(f.Key, m)
		}
	case zapcore.InlineMarshalerType:
		// An inlined object's fields join the entry: none is the header
		// object itself, but any may hold one.
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			f.Interface = &objNode{inner: m, s: s}
		}
	case zapcore.ArrayMarshalerType:
		if a, ok := f.Interface.(zapcore.ArrayMarshaler); ok {
			f.Interface = s.array(f.Key, a)
		}
	case zapcore.ReflectType:
		f.Interface = s.reflected(f.Key, f.Interface)
	}
}

// object returns the marshaler that logs m under key: masked when it is a
// header object, watched for nested header objects otherwise.
func (s *Secrets) object(key string, m zapcore.ObjectMarshaler) zapcore.ObjectMarshaler {
	if headerKey(key) {
		return &maskedObject{inner: m, s: s}
	}
	return &objNode{inner: m, s: s}
}

// array returns the marshaler that logs a under key, watching its
// objects; under a header key its objects are header objects. Caddy's
// string arrays (a request's transfer encodings) hold no object and pass
// as they are.
func (s *Secrets) array(key string, a zapcore.ArrayMarshaler) zapcore.ArrayMarshaler {
	if _, ok := a.(caddyhttp.LoggableStringArray); ok {
		return a
	}
	return &arrNode{inner: a, s: s, headers: headerKey(key)}
}

// reflected masks an http.Header logged by reflection under a header key;
// anything else passes as it is (reflection cannot be watched inside).
func (s *Secrets) reflected(key string, v any) any {
	if h, ok := v.(http.Header); ok && headerKey(key) {
		return s.maskHeader(h)
	}
	return v
}

// objNode logs an object that is not a header object, watching its
// object and array fields for header objects at any depth; scalar fields
// go straight to the real encoder. Like maskedObject it is both the
// marshaler and the encoder the object writes to, one allocation per
// object, safe because each node is made for one field and marshaled
// synchronously.
type objNode struct {
	zapcore.ObjectEncoder
	inner zapcore.ObjectMarshaler
	s     *Secrets
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (n *objNode) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	n.ObjectEncoder = enc
	return n.inner.MarshalLogObject(n)
}

// AddObject masks a nested header object, or watches inside another one.
func (n *objNode) AddObject(key string, m zapcore.ObjectMarshaler) error {
	return n.ObjectEncoder.AddObject(key, n.s.object(key, m))
}

// AddArray watches inside a nested array.
func (n *objNode) AddArray(key string, a zapcore.ArrayMarshaler) error {
	return n.ObjectEncoder.AddArray(key, n.s.array(key, a))
}

// AddReflected masks a nested http.Header under a header key.
func (n *objNode) AddReflected(key string, v any) error {
	return n.ObjectEncoder.AddReflected(key, n.s.reflected(key, v))
}

// arrNode logs an array, watching its objects (and nested arrays); under
// a header key (headers set) its objects are masked as header objects.
type arrNode struct {
	zapcore.ArrayEncoder
	inner   zapcore.ArrayMarshaler
	s       *Secrets
	headers bool
}

// MarshalLogArray implements zapcore.ArrayMarshaler.
func (a *arrNode) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	a.ArrayEncoder = enc
	return a.inner.MarshalLogArray(a)
}

// AppendObject masks or watches an element object.
func (a *arrNode) AppendObject(m zapcore.ObjectMarshaler) error {
	if a.headers {
		return a.ArrayEncoder.AppendObject(&maskedObject{inner: m, s: a.s})
	}
	return a.ArrayEncoder.AppendObject(&objNode{inner: m, s: a.s})
}

// AppendArray watches inside an element array.
func (a *arrNode) AppendArray(m zapcore.ArrayMarshaler) error {
	return a.ArrayEncoder.AppendArray(&arrNode{inner: m, s: a.s, headers: a.headers})
}

// AppendReflected masks an element http.Header under a header key.
func (a *arrNode) AppendReflected(v any) error {
	if h, ok := v.(http.Header); ok && a.headers {
		v = a.s.maskHeader(h)
	}
	return a.ArrayEncoder.AppendReflected(v)
}

// Interface guards.
var (
	_ zapcore.Encoder         = (*redactor)(nil)
	_ zapcore.ObjectMarshaler = (*objNode)(nil)
	_ zapcore.ObjectEncoder   = (*objNode)(nil)
	_ zapcore.ArrayMarshaler  = (*arrNode)(nil)
	_ zapcore.ArrayEncoder    = (*arrNode)(nil)
	_ zapcore.ObjectMarshaler = (*maskedObject)(nil)
)
