package handlers

import (
	"bytes"
	"errors"
	"net/http"
	"sync"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Held answers and their budget. A success is held whole when something
// must see it before the client does: its integrity check (integrity.go),
// a deadline, the cache, a translation, hooks or a stage. A held answer
// costs its size plus a small constant: the first MiB goes into a buffer
// that doubles as it grows (as before, so a small answer costs what it
// always did); beyond it, an answer with a declared Content-Length gets
// one buffer of exactly that length (a length alone takes no memory),
// and one without is read into pooled fixed-size chunks, joined into one
// exact buffer when its last byte arrived, the chunks going back to the
// pool for the next answer. Doubling instead would leave garbage of up
// to three times the answer's size.
//
// Every byte a capture allocates is taken from the llm app's budget
// (max_held_bytes) before it is allocated, and given back when the
// allocation is dropped, so the answers held at once by all routes are
// bounded by what they really hold: an outgrown buffer until its
// contents are copied, the chunks until they are joined, and for that
// moment the joined buffer too (an answer of unknown length needs about
// twice its size of the budget while it is joined). An
// answer that does not fit and was held only to be checked, timed or
// cached passes through instead, checked as it streams (shapeStream): a
// malformed one breaks the client's connection. One that cannot pass
// through unheld (translated, judged by hooks, wrapped) is a 503.

// errHeldBudget stops send copying an answer the budget has no room for.
var errHeldBudget = errors.New("held-answer budget spent")

// heldBudgetError is the 503 of an answer that must be held when the
// budget has no room for it.
func heldBudgetError(limit int64) *apierror.Error {
	return apierror.Newf(http.StatusServiceUnavailable, apierror.TypeServer,
		"the gateway is holding its limit of %d bytes of provider answers (max_held_bytes); retry shortly", limit).WithCode("held_budget_exceeded")
}

// reserve takes n bytes of the budget for this capture.
func (c *capture) reserve(n int64) bool {
	if !c.budget.TryAcquire(n) {
		return false
	}
	c.reserved += n
	if c.heldTotal != nil {
		*c.heldTotal += n
	}
	return true
}

// releaseOwn gives back what this capture reserved.
func (c *capture) releaseOwn() {
	c.budget.Release(c.reserved)
	if c.heldTotal != nil {
		*c.heldTotal -= c.reserved
	}
	c.reserved, c.bufFunded = 0, 0
}

// unreserve gives back n of the bytes this capture reserved.
func (c *capture) unreserve(n int64) {
	n = min(n, c.reserved)
	if n <= 0 {
		return
	}
	c.budget.Release(n)
	c.reserved -= n
	if c.heldTotal != nil {
		*c.heldTotal -= n
	}
}

// grow makes room for need bytes in the held buffer, reserving the new
// buffer before it is allocated and giving the old one back once it is
// copied; false means the budget had no room.
func (c *capture) grow(need int) bool {
	size := max(need, 2*c.buf.Cap())
	if c.declared > 0 && int64(need) <= c.declared {
		// The first MiB, then exactly the declared length: one copy
		// of at most a MiB, and no slack.
		size = int(c.declared)
		if need <= maxPrealloc {
			size = int(min(c.declared, maxPrealloc))
		}
	}
	// The declared length was reserved when the status arrived: the
	// buffer of exactly that length is paid for already.
	funded := int64(size)
	if c.declared > 0 && funded == c.declared {
		funded = 0
	}
	if !c.reserve(funded) {
		return false
	}
	nb := make([]byte, c.buf.Len(), size)
	copy(nb, c.buf.Bytes())
	c.buf = *bytes.NewBuffer(nb)
	c.unreserve(c.bufFunded)
	c.bufFunded = funded
	return true
}

// heldChunkSize is the size of the pooled chunks an answer of unknown
// length is read into beyond its first MiB (maxPrealloc).
const heldChunkSize = 64 << 10

// heldChunk is one chunk; a pointer to an array puts into a sync.Pool
// without an allocation.
type heldChunk = [heldChunkSize]byte

// heldChunks are reused by every held answer of the process: a cache of
// free memory, no state, so a package-level pool (as copyBufs).
var heldChunks = sync.Pool{New: func() any { return new(heldChunk) }}

// chunking says whether p goes into chunks: once chunks were started, or
// when the held answer outgrows both its first MiB and its declared
// length.
func (c *capture) chunking(need int) bool {
	return len(c.chunks) > 0 || int64(need) > max(c.declared, maxPrealloc)
}

// writeChunks appends p to the chunks, reserving each new chunk before
// it is taken; beyond the budget the answer overflows.
func (c *capture) writeChunks(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		off := c.chunked % heldChunkSize
		if off == 0 {
			// No chunk yet, or the last one is full.
			if !c.reserve(heldChunkSize) {
				if err := c.overflow(); err != nil {
					return 0, err
				}
				if _, err := c.Write(p); err != nil {
					return 0, err
				}
				return n, nil
			}
			if c.chunks == nil {
				// Room for 2 MiB of chunks before the list grows.
				c.chunks = make([]*heldChunk, 0, 32)
			}
			c.chunks = append(c.chunks, heldChunks.Get().(*heldChunk))
		}
		k := copy(c.chunks[len(c.chunks)-1][off:], p)
		c.chunked += k
		p = p[k:]
	}
	return n, nil
}

// dropChunks returns the chunks to the pool (their reservation is the
// caller's to give back).
func (c *capture) dropChunks() {
	for i, ch := range c.chunks {
		heldChunks.Put(ch)
		c.chunks[i] = nil
	}
	c.chunks, c.chunked = nil, 0
}

// eachChunk calls f with the filled part of each chunk, in order.
func (c *capture) eachChunk(f func(p []byte) error) error {
	left := c.chunked
	for _, ch := range c.chunks {
		k := min(left, heldChunkSize)
		if err := f(ch[:k]); err != nil {
			return err
		}
		left -= k
	}
	return nil
}

// join ends a held answer that went into chunks, once its body ended
// cleanly: one buffer of exactly its size, reserved before it is
// allocated, takes the first MiB and the chunks; the chunks go back to
// the pool and what they and the first buffer had reserved goes back to
// the budget. Without room for the joined buffer the answer overflows
// (passes through, checked, or is refused) as it would have mid-body.
func (c *capture) join() error {
	if c.mode != modeHold || len(c.chunks) == 0 {
		return nil
	}
	n := c.buf.Len() + c.chunked
	if !c.reserve(int64(n)) {
		return c.overflow()
	}
	body := make([]byte, n)
	k := copy(body, c.buf.Bytes())
	_ = c.eachChunk(func(p []byte) error {
		k += copy(body[k:], p)
		return nil
	})
	c.dropChunks()
	c.buf = *bytes.NewBuffer(body)
	c.unreserve(c.reserved - int64(n))
	c.bufFunded = int64(n)
	return nil
}

// overflow handles a held answer the budget has no room for: one that
// must be held is refused; any other passes through from here on, what
// was held first. Its reservation is kept until that is written.
func (c *capture) overflow() error {
	if c.mustHold {
		c.overBudget = true
		c.dropHeld()
		return errHeldBudget
	}
	defer c.dropHeld()
	c.mode = modePass
	if c.validate {
		c.check = newShapeStream(c.call.Op)
		// Chunked, so a check failing at the very end can still leave
		// the answer visibly incomplete.
		c.header.Del("Content-Length")
	} else if c.call.Op != providers.OpProxy && isJSON(c.header) {
		c.startTee(maxErrorBody)
	}
	c.doCommit()
	if c.buf.Len() > 0 {
		if _, err := c.Write(c.buf.Bytes()); err != nil {
			return err
		}
	}
	return c.eachChunk(func(p []byte) error {
		_, err := c.Write(p)
		return err
	})
}

// dropHeld drops everything the capture holds (the buffer, the chunks
// back to the pool) and gives back its reservation.
func (c *capture) dropHeld() {
	c.buf = bytes.Buffer{}
	c.dropChunks()
	c.releaseOwn()
}

// releaseHeld gives back the budget the request's held answers took;
// run calls it once the answer was written.
func (e *executor) releaseHeld() {
	e.budget.Release(e.heldBytes)
	e.heldBytes = 0
}
