package logfilter

import (
	"net/http"
	"strings"

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
	return &lazyContext{parent: r}
}

// AddObject masks a header object and watches inside any other object.
// zap's With (and Caddy's WithLazy of the request) lands here.
func (r *redactor) AddObject(key string, m zapcore.ObjectMarshaler) error {
	w := getWalker(r.s)
	err := w.addObject(r.Encoder, key, m)
	w.release()
	return err
}

// AddArray watches inside the array's objects.
func (r *redactor) AddArray(key string, a zapcore.ArrayMarshaler) error {
	w := getWalker(r.s)
	err := w.addArray(r.Encoder, key, a)
	w.release()
	return err
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
	w := getWalker(r.s)
	w.fields = append(w.fields[:0], fields...)
	for i := first; i < len(w.fields); i++ {
		w.wrapField(&w.fields[i])
	}
	buf, err := r.Encoder.EncodeEntry(ent, w.fields)
	w.release()
	return buf, err
}

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
// The nodes it takes stay in use until the walker is released, after the
// whole entry is encoded.
func (w *walker) wrapField(f *zapcore.Field) {
	switch f.Type {
	case zapcore.ObjectMarshalerType:
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			if headerKey(f.Key) {
				f.Interface = w.maskedNode(m)
			} else {
				f.Interface = w.objNode(m)
			}
		}
	case zapcore.InlineMarshalerType:
		// An inlined object's fields join the entry: none is the header
		// object itself, but any may hold one.
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			f.Interface = w.objNode(m)
		}
	case zapcore.ArrayMarshalerType:
		if a, ok := f.Interface.(zapcore.ArrayMarshaler); ok && watched(a) {
			f.Interface = w.arrNode(a, headerKey(f.Key))
		}
	case zapcore.ReflectType:
		f.Interface = w.s.reflected(f.Key, f.Interface)
	}
}

// addObject adds m under key to enc: masked when it is a header object,
// watched for nested header objects otherwise.
func (w *walker) addObject(enc zapcore.ObjectEncoder, key string, m zapcore.ObjectMarshaler) error {
	if headerKey(key) {
		n := w.maskedNode(m)
		err := enc.AddObject(key, n)
		w.masked.put(n)
		return err
	}
	n := w.objNode(m)
	err := enc.AddObject(key, n)
	w.objs.put(n)
	return err
}

// addArray adds a under key to enc, watching its objects; under a header
// key its objects are header objects.
func (w *walker) addArray(enc zapcore.ObjectEncoder, key string, a zapcore.ArrayMarshaler) error {
	if !watched(a) {
		return enc.AddArray(key, a)
	}
	n := w.arrNode(a, headerKey(key))
	err := enc.AddArray(key, n)
	w.arrs.put(n)
	return err
}

func (w *walker) objNode(m zapcore.ObjectMarshaler) *objNode {
	n := w.objs.get()
	n.inner, n.w = m, w
	return n
}

func (w *walker) maskedNode(m zapcore.ObjectMarshaler) *maskedObject {
	n := w.masked.get()
	n.inner, n.s = m, w.s
	return n
}

func (w *walker) arrNode(a zapcore.ArrayMarshaler, headers bool) *arrNode {
	n := w.arrs.get()
	n.inner, n.w, n.headers = a, w, headers
	return n
}

// watched reports whether an array can hold objects to watch. Caddy's
// string arrays (a request's transfer encodings) hold none and pass as
// they are.
func watched(a zapcore.ArrayMarshaler) bool {
	_, ok := a.(caddyhttp.LoggableStringArray)
	return !ok
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
// go straight to the real encoder. It is both the marshaler and the
// encoder the object writes to, taken from the walker for one object and
// marshaled synchronously.
type objNode struct {
	zapcore.ObjectEncoder
	inner zapcore.ObjectMarshaler
	w     *walker
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (n *objNode) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	n.ObjectEncoder = enc
	return n.inner.MarshalLogObject(n)
}

// AddObject masks a nested header object, or watches inside another one.
func (n *objNode) AddObject(key string, m zapcore.ObjectMarshaler) error {
	return n.w.addObject(n.ObjectEncoder, key, m)
}

// AddArray watches inside a nested array.
func (n *objNode) AddArray(key string, a zapcore.ArrayMarshaler) error {
	return n.w.addArray(n.ObjectEncoder, key, a)
}

// AddReflected masks a nested http.Header under a header key.
func (n *objNode) AddReflected(key string, v any) error {
	return n.ObjectEncoder.AddReflected(key, n.w.s.reflected(key, v))
}

// arrNode logs an array, watching its objects (and nested arrays); under
// a header key (headers set) its objects are masked as header objects.
type arrNode struct {
	zapcore.ArrayEncoder
	inner   zapcore.ArrayMarshaler
	w       *walker
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
		n := a.w.maskedNode(m)
		err := a.ArrayEncoder.AppendObject(n)
		a.w.masked.put(n)
		return err
	}
	n := a.w.objNode(m)
	err := a.ArrayEncoder.AppendObject(n)
	a.w.objs.put(n)
	return err
}

// AppendArray watches inside an element array.
func (a *arrNode) AppendArray(m zapcore.ArrayMarshaler) error {
	n := a.w.arrNode(m, a.headers)
	err := a.ArrayEncoder.AppendArray(n)
	a.w.arrs.put(n)
	return err
}

// AppendReflected masks an element http.Header under a header key.
func (a *arrNode) AppendReflected(v any) error {
	if h, ok := v.(http.Header); ok && a.headers {
		v = a.w.s.maskHeader(h)
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
