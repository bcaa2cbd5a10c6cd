package app

import (
	"fmt"
	"sync/atomic"
)

// DefaultMaxHeldBytes is the default process-wide bound on provider
// answers held whole at once: four answers of the default
// max_response_body (64 MiB), or thousands of ordinary ones.
const DefaultMaxHeldBytes = 256 << 20

// heldState adds "max_held_bytes" and the budget it sets.
type heldState struct {
	// MaxHeldBytes bounds the bytes of provider answers every
	// llm_gateway route of this config holds whole at once (to check,
	// translate, cache or judge them), in bytes; default
	// DefaultMaxHeldBytes. What is counted is what the held answers
	// have allocated: an answer of unknown length beyond its first MiB
	// takes about twice its size for the moment its chunks are joined
	// into one buffer (handlers/heldbudget.go). Beyond it an answer
	// that is held only to be checked passes through with the check
	// done as it streams; one that must be held (translated, judged by
	// hooks) is a 503.
	MaxHeldBytes int64 `json:"max_held_bytes,omitempty"`

	held *HeldBudget
}

func (a *App) provisionHeld() error {
	if a.MaxHeldBytes < 0 {
		return fmt.Errorf("max_held_bytes must not be negative")
	}
	limit := a.MaxHeldBytes
	if limit == 0 {
		limit = DefaultMaxHeldBytes
	}
	a.held = &HeldBudget{limit: limit}
	return nil
}

// HeldBudget returns the config's budget of held answer bytes.
func (a *App) HeldBudget() *HeldBudget { return a.held }

// HeldBudget counts the bytes of answers held at once against a limit.
// A nil *HeldBudget admits everything. It is safe for concurrent use.
type HeldBudget struct {
	limit int64
	used  atomic.Int64
}

// NewHeldBudget returns a budget of limit bytes (for tests and tools).
func NewHeldBudget(limit int64) *HeldBudget { return &HeldBudget{limit: limit} }

// TryAcquire takes n bytes of the budget if they are free, without
// waiting: a held answer that does not fit is not held.
func (b *HeldBudget) TryAcquire(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release gives back n bytes TryAcquire took.
func (b *HeldBudget) Release(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// Limit is the budget's size in bytes (0 for a nil budget).
func (b *HeldBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse is the bytes taken now.
func (b *HeldBudget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}
