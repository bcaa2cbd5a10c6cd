// Package bodybuf lends buffers for large request bodies and takes each
// back once its owner and every reader of it are done.
//
// The gateway reads a request body whole (it must check and route on it),
// where a reverse proxy streams it through a small pooled buffer. For a
// 200 KB prompt the exact-size allocation (zeroing cold memory) and the
// garbage collection that 200 KB a request causes were most of what the
// gateway added to plain Caddy. Reusing the buffers removes both, but a
// body outlives the handler that read it: net/http may still be writing
// it to the provider after RoundTrip returned, and closes it "in a
// separate goroutine even after RoundTrip returns" (http.RoundTripper).
// So a Buf counts references: its owner holds one, each reader handed to
// a transport holds one until the transport closes it, and the buffer
// returns to its pool only when the count reaches zero. A consumer that
// keeps the bytes beyond all of them without a reference (an async hook)
// calls Keep, and the buffer is left to the garbage collector instead.
//
// The pools are package-level like net/http's and Caddy's reverse proxy
// copy buffers: scratch memory, not configuration state, and emptied by
// the garbage collector when idle.
package bodybuf

import (
	"errors"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MinPooled and MaxPooled bound the body sizes Get lends from a pool:
// below MinPooled an allocation is cheap and its garbage small (Go
// allocates objects above 32 KB straight from the heap); above MaxPooled
// a pooled buffer would hold too much memory between requests.
const (
	MinPooled = 32 << 10
	MaxPooled = 4 << 20
)

// classes are the pooled capacities: powers of two from 64 KB to
// MaxPooled, so a body uses less than twice its size.
const (
	minShift = 16 // 64 KB
	maxShift = 22 // MaxPooled
)

var pools [maxShift - minShift + 1]sync.Pool

// Buf is a body buffer with a reference count.
type Buf struct {
	b []byte
	// refs counts the owner and the open readers; kept stops the buffer
	// from returning to a pool.
	refs  atomic.Int32
	kept  atomic.Bool
	class int8
}

// Get returns a buffer of n bytes, held by the caller (Release gives it
// back), from a pool when n is between MinPooled and MaxPooled, or nil
// otherwise: the caller then allocates as usual.
func Get(n int64) *Buf {
	if n < MinPooled || n > MaxPooled {
		return nil
	}
	shift := max(bits.Len64(uint64(n-1)), minShift)
	class := shift - minShift
	b, _ := pools[class].Get().(*Buf)
	if b == nil {
		b = &Buf{b: make([]byte, 1<<shift), class: int8(class)}
	}
	b.b = b.b[:n]
	b.kept.Store(false)
	b.refs.Store(1)
	return b
}

// Bytes is the body: n bytes, capacity n, so an append copies instead of
// writing into the pooled memory beyond it.
func (b *Buf) Bytes() []byte {
	if b == nil {
		return nil
	}
	return b.b[:len(b.b):len(b.b)]
}

// Owns reports whether p lies in b's memory (the body or a part of it).
func (b *Buf) Owns(p []byte) bool {
	if b == nil || len(p) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b.b)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return at >= start && at+uintptr(len(p)) <= start+uintptr(cap(b.b))
}

// Keep leaves the buffer to the garbage collector instead of a pool, for
// a consumer that holds the bytes past the owner without a reference.
func (b *Buf) Keep() {
	if b != nil {
		b.kept.Store(true)
	}
}

// Release drops a reference; the last one returns the buffer to its pool.
func (b *Buf) Release() {
	if b == nil {
		return
	}
	if n := b.refs.Add(-1); n > 0 {
		return
	} else if n < 0 {
		panic("bodybuf: released more often than held")
	}
	if !b.kept.Load() {
		put(b)
	}
}

// put returns b to its pool (a variable so tests can watch it).
var put = func(b *Buf) { pools[b.class].Put(b) }

// acquire adds a reference unless the count already reached zero.
func (b *Buf) acquire() bool {
	for {
		n := b.refs.Load()
		if n <= 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// ErrReleased is what a reader of a buffer given back before the reader
// was made reads.
var ErrReleased = errors.New("bodybuf: the body's buffer was released")

// errClosed is what a closed reader reads.
var errClosed = errors.New("bodybuf: read of a closed body")

// NewReader returns a reader of p, which must lie in b (Owns), holding a
// reference until it is closed. Read and Close exclude each other, so a
// transport closing the body from another goroutine while still reading
// it never reads the buffer after its reference was dropped.
func (b *Buf) NewReader(p []byte) io.ReadCloser {
	if !b.acquire() {
		return &reader{err: ErrReleased}
	}
	return &reader{buf: b, p: p}
}

type reader struct {
	mu  sync.Mutex
	buf *Buf
	p   []byte
	off int
	err error
}

// Read implements io.Reader.
func (r *reader) Read(dst []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.err != nil:
		return 0, r.err
	case r.buf == nil:
		return 0, errClosed
	case r.off >= len(r.p):
		return 0, io.EOF
	}
	n := copy(dst, r.p[r.off:])
	r.off += n
	return n, nil
}

// Close implements io.Closer: it drops the reader's reference, once.
func (r *reader) Close() error {
	r.mu.Lock()
	b := r.buf
	r.buf, r.p = nil, nil
	r.mu.Unlock()
	b.Release()
	return nil
}
