package console

import (
	"testing"
	"time"
)

// TestPendingSignIns: a begun sign-in is found once by its state (a
// replay finds nothing), not after pendingTTL, and the table is bounded:
// full of live sign-ins it refuses a new one, and expired ones make room.
func TestPendingSignIns(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newSessions()
	s.now = func() time.Time { return now }

	state, err := s.begin("n", "v")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		state string
		ok    bool
	}{
		{"the state", state, true},
		{"replayed", state, false},
		{"unknown", "other", false},
		{"empty", "", false},
	} {
		if p, ok := s.finish(tc.state); ok != tc.ok || ok && (p.nonce != "n" || p.verifier != "v") {
			t.Errorf("%s: finish = %+v, %v; want found %v", tc.name, p, ok, tc.ok)
		}
	}

	late, _ := s.begin("n", "v")
	now = now.Add(pendingTTL)
	if _, ok := s.finish(late); ok {
		t.Error("a sign-in past pendingTTL was finished")
	}

	for range MaxPendingSignIns {
		if _, err := s.begin("n", "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.begin("n", "v"); err != errTooManyPending {
		t.Fatalf("begin on a full table: %v, want errTooManyPending", err)
	}
	now = now.Add(pendingTTL)
	if _, err := s.begin("n", "v"); err != nil || len(s.pending) != 1 {
		t.Fatalf("begin after every sign-in expired: %v, %d held; want the expired ones dropped", err, len(s.pending))
	}
}
