package handlers

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Held answers and their budget. A success is held whole when something
// must see it before the client does: its integrity check (integrity.go),
// a deadline, the cache, a translation, hooks or a stage. A held answer
// costs its size plus a small constant: with a declared Content-Length
// the buffer grows to exactly that length once the first MiB arrived (a
// length alone takes no memory); without one it doubles as it grows.
// Every held byte is taken from the llm app's budget (max_held_bytes)
// first, so the answers held at once by all routes are bounded. An
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
	c.reserved = 0
}

// grow makes room for need bytes in the held buffer, reserving the new
// capacity first; false means the budget had no room.
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
	if extra := int64(size) - c.reserved; extra > 0 && !c.reserve(extra) {
		return false
	}
	nb := make([]byte, c.buf.Len(), size)
	copy(nb, c.buf.Bytes())
	c.buf = *bytes.NewBuffer(nb)
	return true
}

// overflow handles a held answer the budget has no room for: one that
// must be held is refused; any other passes through from here on.
func (c *capture) overflow() error {
	if c.mustHold {
		c.overBudget = true
		c.buf = bytes.Buffer{}
		c.releaseOwn()
		return errHeldBudget
	}
	held := c.buf.Bytes()
	c.buf = bytes.Buffer{}
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
	c.releaseOwn()
	if len(held) > 0 {
		if _, err := c.Write(held); err != nil {
			return err
		}
	}
	return nil
}

// releaseHeld gives back the budget the request's held answers took;
// run calls it once the answer was written.
func (e *executor) releaseHeld() {
	e.budget.Release(e.heldBytes)
	e.heldBytes = 0
}
