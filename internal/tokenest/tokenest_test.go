package tokenest

import "testing"

// TestParts pins the estimate: ⌈size/4⌉ for the prompt, the first output
// bound present times n, everything bounded by Max.
func TestParts(t *testing.T) {
	tests := []struct {
		body        string
		size        int64
		prompt, out int64
	}{
		{`{}`, 9, 3, 0},
		{`{"max_tokens":100}`, 0, 0, 100},
		{`{"max_completion_tokens":50,"max_tokens":100}`, 4, 1, 50},
		{`{"max_output_tokens":10,"n":3}`, 0, 0, 30},
		{`{"max_tokens":10,"n":1000}`, 0, 0, 10 * maxChoices},
		{`{"max_tokens":1e300}`, 0, 0, Max},
		{``, 1 << 62, Max, 0},
	}
	for _, tt := range tests {
		p, o := Parts([]byte(tt.body), tt.size)
		if p != tt.prompt || o != tt.out {
			t.Errorf("%s (%d bytes): %d, %d; want %d, %d", tt.body, tt.size, p, o, tt.prompt, tt.out)
		}
	}
}
