package identity

import "testing"

func TestModelAllowed(t *testing.T) {
	tests := []struct {
		patterns []string
		model    string
		want     bool
	}{
		{nil, "o3", true},
		{[]string{"gpt-4o*"}, "gpt-4o-mini", true},
		{[]string{"gpt-4o*"}, "gpt-4o", true},
		{[]string{"gpt-4o*"}, "o3", false},
		{[]string{"gpt-4o*", "o3"}, "o3", true},
		{[]string{"claude-?-haiku"}, "claude-3-haiku", true},
		{[]string{"[bad"}, "[bad", false},
	}
	for _, tt := range tests {
		if got := ModelAllowed(tt.patterns, tt.model); got != tt.want {
			t.Errorf("ModelAllowed(%v, %q) = %v", tt.patterns, tt.model, got)
		}
	}
}

func TestHasScope(t *testing.T) {
	tests := []struct {
		held []string
		want string
		ok   bool
	}{
		{[]string{"*"}, "api_keys.create", true},
		{[]string{"api_keys.create"}, "api_keys.create", true},
		{[]string{"api_keys.create"}, "api_keys.delete", false},
		{[]string{"configs.*"}, "configs.delete", true},
		{[]string{"configs.*"}, "api_keys.read", false},
		{[]string{"configs.read"}, "configs.list", true},
		{[]string{"configs.list"}, "configs.read", false},
		{nil, "configs.read", false},
		{[]string{"configs.*"}, "*", false},
	}
	for _, tt := range tests {
		if got := HasScope(tt.held, tt.want); got != tt.ok {
			t.Errorf("HasScope(%v, %q) = %v", tt.held, tt.want, got)
		}
	}
}
