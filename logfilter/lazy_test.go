package logfilter

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// countingObj counts how often it is marshaled.
type countingObj struct {
	n atomic.Int32
	h http.Header
}

func (c *countingObj) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	c.n.Add(1)
	return loggableHeader(c.h).MarshalLogObject(enc)
}

// TestContextEncodedOnlyWhenWritten: a logger's context (Caddy's request,
// added to every log's core) is encoded only when an entry is written
// with it, once however many entries follow, and still masked.
func TestContextEncodedOnlyWhenWritten(t *testing.T) {
	var buf bytes.Buffer
	core := zapcore.NewCore(newEncoder(t, &Encoder{}), zapcore.AddSync(&buf), zapcore.InfoLevel)
	obj := &countingObj{h: http.Header{"X-Api-Key": {"k-secret"}, "Accept": {"*/*"}}}
	logger := zap.New(core).With(zap.Object("headers", obj))
	logger.Debug("refused by level")
	if n := obj.n.Load(); n != 0 {
		t.Fatalf("context marshaled %d times for an entry that was not written", n)
	}
	logger.Info("one")
	logger.Info("two")
	logger.With(zap.String("more", "x")).Info("three")
	if n := obj.n.Load(); n != 1 {
		t.Fatalf("context marshaled %d times for three entries, want 1", n)
	}
	out := buf.String()
	if strings.Contains(out, "k-secret") || strings.Count(out, `"X-Api-Key":["REDACTED"]`) != 3 {
		t.Fatalf("context not masked in every line:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"three","headers":{`) || !strings.Contains(out, `"more":"x"`) {
		t.Fatalf("nested context lost or reordered:\n%s", out)
	}
}

// TestContextOutputMatchesJSON: context fields of every kind, nested in
// two With calls, come out byte for byte as plain json writes them.
func TestContextOutputMatchesJSON(t *testing.T) {
	at := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	outer := []zapcore.Field{
		zap.String("s", "v\"q"), zap.Bool("b", true), zap.Bool("f", false), zap.Int("i", -3), zap.Int64("i64", 1<<40),
		zap.Int32("i32", -7), zap.Int16("i16", 9), zap.Int8("i8", -1), zap.Uint("u", 3), zap.Uint64("u64", 1<<63),
		zap.Uint32("u32", 7), zap.Uint16("u16", 8), zap.Uint8("u8", 9), zap.Uintptr("p", 0xff),
		zap.Float64("f64", 1.25), zap.Float32("f32", 0.5), zap.Complex128("c128", 1+2i), zap.Complex64("c64", 3+4i),
		zap.Duration("d", 1500*time.Millisecond), zap.Time("t", at), zap.Binary("bin", []byte{0, 1, 2}),
		zap.ByteString("bs", []byte("bytes")), zap.Reflect("r", map[string]int{"a": 1}),
		zap.Object("o", fieldsObj{zap.String("k", "v")}), zap.Array("a", objArray{fieldsObj{zap.Int("n", 1)}}),
	}
	inner := []zapcore.Field{zap.Namespace("ns"), zap.String("in", "side")}
	line := func(enc zapcore.Encoder) string {
		var buf bytes.Buffer
		core := zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel)
		zap.New(core, zap.WithClock(fixedClock{})).With(outer...).With(inner...).Info("m", zap.String("call", "c"))
		return buf.String()
	}
	if got, want := line(newEncoder(t, &Encoder{})), line(plainJSON(t)); got != want {
		t.Fatalf("lines differ\n got: %s\nwant: %s", got, want)
	}
}

// TestContextConcurrentFirstWrite: goroutines writing the first entries
// of one shared logger encode its context once, race free (run -race).
func TestContextConcurrentFirstWrite(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	core := zapcore.NewCore(newEncoder(t, &Encoder{}), zapcore.AddSync(lockedWriter{&mu, &buf}), zapcore.InfoLevel)
	obj := &countingObj{h: http.Header{"Authorization": {"Bearer secret"}}}
	logger := zap.New(core).With(zap.Object("headers", obj))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { logger.Info("x") })
	}
	wg.Wait()
	if n := obj.n.Load(); n != 1 {
		t.Fatalf("context marshaled %d times, want 1", n)
	}
	if strings.Count(buf.String(), `"Authorization":["REDACTED"]`) != 8 {
		t.Fatalf("not every line masked:\n%s", buf.String())
	}
}
