package logfilter

import (
	"strings"
	"testing"
)

func TestSensitiveName(t *testing.T) {
	long := "X-" + strings.Repeat("Very-Long-", 8) + "Api-Key"
	tests := []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"X-Api-Key", true},
		{"X-Goog-Api-Key", true},
		{"X-Amz-Security-Token", true},
		{"X-Gateway-Clouda-Access-Key-Id", true},
		{long, true},
		{"Content-Type", false},
		{"Anthropic-Version", false},
		{"X-Request-Id", false},
	}
	for _, tt := range tests {
		if got := SensitiveName(tt.name); got != tt.want {
			t.Errorf("SensitiveName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { SensitiveName("X-Goog-Api-Key") }); n != 0 && !raceEnabled {
		t.Errorf("%v allocations for a short name", n)
	}
}
