package batches

import (
	"testing"
	"time"
)

// TestSetLease: a configured lease replaces the engine's from then on
// and 0 restores it; an engine without leases (no Redis) keeps none.
func TestSetLease(t *testing.T) {
	leased := NewEngine(Config{Lease: DefaultLease})
	plain := NewEngine(Config{})
	for _, tc := range []struct {
		set         time.Duration
		leased, off time.Duration
	}{
		{0, DefaultLease, 0},
		{3 * time.Second, 3 * time.Second, 0},
		{MaxLease, MaxLease, 0},
		{0, DefaultLease, 0},
	} {
		leased.SetLease(tc.set)
		plain.SetLease(tc.set)
		if got := leased.leaseLen(); got != tc.leased {
			t.Errorf("SetLease(%v): lease %v, want %v", tc.set, got, tc.leased)
		}
		if got := plain.leaseLen(); got != tc.off || plain.leaser() != nil {
			t.Errorf("SetLease(%v) on an engine without leases: %v", tc.set, got)
		}
	}
}
