package logfilter

import (
	"bytes"
	"math"
	"sync"
	"time"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// lazyContext is what redactor.Clone returns: the context fields zap's
// With adds, recorded rather than encoded, until the first entry is
// encoded with them. Caddy adds each request to its access logger with
// WithLazy, and zap then encodes it into every configured log's core,
// including those that refuse the entry by name or level (the default
// log, for an access log line); with the masking walk and Caddy's header
// marshaling that was the largest part of logging a request twice. A
// context that writes no entry now costs one small allocation; one that
// writes encodes its fields once, through the same masking, in the same
// order, so the line is byte for byte what it was.
type lazyContext struct {
	// parent is the encoder the context was cloned from.
	parent contextEncoder
	fields []zapcore.Field

	once sync.Once
	enc  *redactor
}

// contextEncoder is an encoder whose context can be made real: a
// provisioned redactor, or a lazyContext.
type contextEncoder interface {
	real() *redactor
}

func (r *redactor) real() *redactor { return r }

// clone is the redactor's eager clone: the wrapped encoder's own, with
// the masking kept on it.
func (r *redactor) clone() *redactor {
	return &redactor{Encoder: r.Encoder.Clone(), s: r.s}
}

// real encodes the recorded fields into a clone of the parent's real
// encoder, once; loggers are shared between goroutines.
func (l *lazyContext) real() *redactor {
	l.once.Do(func() {
		r := l.parent.real().clone()
		for i := range l.fields {
			l.fields[i].AddTo(r)
		}
		l.enc, l.fields = r, nil
	})
	return l.enc
}

func (l *lazyContext) add(f zapcore.Field) { l.fields = append(l.fields, f) }

// Clone implements zapcore.Encoder: a context on top of this one, itself
// recorded.
func (l *lazyContext) Clone() zapcore.Encoder {
	return &lazyContext{parent: l}
}

// EncodeEntry implements zapcore.Encoder.
func (l *lazyContext) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	return l.real().EncodeEntry(ent, fields)
}

// The ObjectEncoder methods record one field each; Field.AddTo replays
// them into the real encoder, through the redactor's masking.

func (l *lazyContext) AddArray(key string, v zapcore.ArrayMarshaler) error {
	l.add(zapcore.Field{Key: key, Type: zapcore.ArrayMarshalerType, Interface: v})
	return nil
}

func (l *lazyContext) AddObject(key string, v zapcore.ObjectMarshaler) error {
	l.add(zapcore.Field{Key: key, Type: zapcore.ObjectMarshalerType, Interface: v})
	return nil
}

// Byte slices are copied: zap's With encodes at once, so a caller may
// reuse the slice after it returns.

func (l *lazyContext) AddBinary(key string, v []byte) {
	l.add(zapcore.Field{Key: key, Type: zapcore.BinaryType, Interface: bytes.Clone(v)})
}

func (l *lazyContext) AddByteString(key string, v []byte) {
	l.add(zapcore.Field{Key: key, Type: zapcore.ByteStringType, Interface: bytes.Clone(v)})
}

func (l *lazyContext) AddBool(key string, v bool) {
	var n int64
	if v {
		n = 1
	}
	l.add(zapcore.Field{Key: key, Type: zapcore.BoolType, Integer: n})
}

func (l *lazyContext) AddComplex128(key string, v complex128) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Complex128Type, Interface: v})
}

func (l *lazyContext) AddComplex64(key string, v complex64) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Complex64Type, Interface: v})
}

func (l *lazyContext) AddDuration(key string, v time.Duration) {
	l.add(zapcore.Field{Key: key, Type: zapcore.DurationType, Integer: int64(v)})
}

func (l *lazyContext) AddFloat64(key string, v float64) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Float64Type, Integer: int64(math.Float64bits(v))})
}

func (l *lazyContext) AddFloat32(key string, v float32) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Float32Type, Integer: int64(math.Float32bits(v))})
}

func (l *lazyContext) AddInt(key string, v int) { l.AddInt64(key, int64(v)) }

func (l *lazyContext) AddInt64(key string, v int64) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Int64Type, Integer: v})
}

func (l *lazyContext) AddInt32(key string, v int32) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Int32Type, Integer: int64(v)})
}

func (l *lazyContext) AddInt16(key string, v int16) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Int16Type, Integer: int64(v)})
}

func (l *lazyContext) AddInt8(key string, v int8) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Int8Type, Integer: int64(v)})
}

func (l *lazyContext) AddString(key, v string) {
	l.add(zapcore.Field{Key: key, Type: zapcore.StringType, String: v})
}

func (l *lazyContext) AddTime(key string, v time.Time) {
	l.add(zapcore.Field{Key: key, Type: zapcore.TimeFullType, Interface: v})
}

func (l *lazyContext) AddUint(key string, v uint) { l.AddUint64(key, uint64(v)) }

func (l *lazyContext) AddUint64(key string, v uint64) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Uint64Type, Integer: int64(v)})
}

func (l *lazyContext) AddUint32(key string, v uint32) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Uint32Type, Integer: int64(v)})
}

func (l *lazyContext) AddUint16(key string, v uint16) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Uint16Type, Integer: int64(v)})
}

func (l *lazyContext) AddUint8(key string, v uint8) {
	l.add(zapcore.Field{Key: key, Type: zapcore.Uint8Type, Integer: int64(v)})
}

func (l *lazyContext) AddUintptr(key string, v uintptr) {
	l.add(zapcore.Field{Key: key, Type: zapcore.UintptrType, Integer: int64(v)})
}

func (l *lazyContext) AddReflected(key string, v any) error {
	l.add(zapcore.Field{Key: key, Type: zapcore.ReflectType, Interface: v})
	return nil
}

func (l *lazyContext) OpenNamespace(key string) {
	l.add(zapcore.Field{Key: key, Type: zapcore.NamespaceType})
}

// Interface guard.
var _ zapcore.Encoder = (*lazyContext)(nil)
