package mcp

import "testing"

func TestRouteOf(t *testing.T) {
	tests := []struct {
		path, server string
		ok           bool
	}{
		{"/mcp", "", true},
		{"/mcp/", "", true},
		{"/mcp/files", "files", true},
		{"/mcp/files/", "files", true},
		{"/mcp/files/extra", "", false},
		{"/mcpx", "", false},
		{"/v1/mcp", "", false},
		{"/mcp//", "", false},
	}
	for _, tt := range tests {
		server, ok := routeOf(tt.path)
		if server != tt.server || ok != tt.ok {
			t.Errorf("routeOf(%q) = %q, %v; want %q, %v", tt.path, server, ok, tt.server, tt.ok)
		}
	}
}
