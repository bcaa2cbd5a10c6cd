package apierror

import (
	"strings"
	"testing"
)

func TestQuoteID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pc-config-1", `"pc-config-1"`},
		{"openai:prod.v2", `"openai:prod.v2"`},
		{`{"api_key":"sk-secret"}`, "(value not shown)"},
		{"sk secret", "(value not shown)"},
		{strings.Repeat("a", MaxQuoted+1), "(value not shown)"},
		{"", "(value not shown)"},
	}
	for _, tt := range tests {
		if got := QuoteID(tt.in); got != tt.want {
			t.Errorf("QuoteID(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestQuotePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/v1/configs", `"/v1/configs"`},
		{"/v1/" + strings.Repeat("x", 200), `"/v1/` + strings.Repeat("x", MaxQuoted-4) + `"…`},
		{"/v1/" + strings.Repeat("é", 100), `"/v1/` + strings.Repeat("é", 30) + `"…`},
	}
	for _, tt := range tests {
		if got := QuotePath(tt.in); got != tt.want {
			t.Errorf("QuotePath(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
