package status

import "testing"

func TestIsHit(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{{Hit, true}, {SemanticHit, true}, {Miss, false}, {SemanticMiss, false}, {Refresh, false}, {Disabled, false}, {"", false}, {"hit", false}} {
		if got := IsHit(tc.s); got != tc.want {
			t.Errorf("IsHit(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
