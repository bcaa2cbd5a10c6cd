package upstream

import (
	"net/netip"
	"testing"
)

func TestGuard(t *testing.T) {
	tests := []struct {
		allow []string
		ip    string
		want  bool
	}{
		{nil, "8.8.8.8", true},
		{nil, "127.0.0.1", false},
		{nil, "::1", false},
		{nil, "10.1.2.3", false},
		{nil, "169.254.169.254", false},
		{nil, "100.64.1.1", false},
		{nil, "0.0.0.0", false},
		{nil, "::ffff:127.0.0.1", false},
		{[]string{"loopback"}, "127.0.0.1", true},
		{[]string{"loopback"}, "::1", true},
		{[]string{"loopback"}, "10.0.0.1", false},
		{[]string{"private"}, "192.168.1.1", true},
		{[]string{"link_local"}, "169.254.169.254", true},
		{[]string{"10.2.0.0/16"}, "10.2.3.4", true},
		{[]string{"10.2.0.0/16"}, "10.3.3.4", false},
		{[]string{"any"}, "127.0.0.1", true},
	}
	for _, tt := range tests {
		g, err := NewGuard(tt.allow)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Allowed(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("allow %v, %s: got %v", tt.allow, tt.ip, got)
		}
	}
	if _, err := NewGuard([]string{"intranet"}); err == nil {
		t.Fatal("unknown range must be rejected")
	}
}
