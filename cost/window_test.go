package cost

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWindow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prices.json")
	// An operator's file: a window alone, a price alone (the built-in
	// window stays) and a window that replaces a built-in one.
	over := `{
	 "openai/gpt-small-ctx": {"litellm_provider": "openai", "max_input_tokens": 4096},
	 "openai/gpt-4o": {"litellm_provider": "openai", "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
	 "anthropic/claude-sonnet-4": {"litellm_provider": "anthropic", "max_input_tokens": 1000000},
	 "my-local-model": {"max_input_tokens": 32768}
	}`
	if err := os.WriteFile(path, []byte(over), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		provider, model string
		want            int64 // 0: none known
	}{
		{"openai", "gpt-4o", 128000},
		{"openai", "gpt-4o-2024-08-06", 128000},
		{"openai", "openai/gpt-4o-mini", 128000},
		{"azure-openai", "gpt-4.1", 1047576},
		{"vendor", "gpt-4", 8192},
		{"openai", "gpt-small-ctx", 4096},
		{"anthropic", "claude-3-5-sonnet-20241022", 200000},
		{"anthropic", "claude-3-5-sonnet-latest", 200000},
		{"anthropic", "claude-sonnet-4", 1000000},
		{"anthropic", "claude-sonnet-4-20250514", 1000000},
		{"bedrock", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", 200000},
		{"vertex-ai", "gemini-2.5-pro", 1048576},
		{"google", "models/gemini-1.5-pro", 2097152},
		{"openai-compatible", "my-local-model", 32768},
		{"openai", "unknown-model", 0},
		{"openai", "", 0},
	}
	for _, tt := range tests {
		w, ok := c.Window(tt.provider, tt.model)
		if w != tt.want || ok != (tt.want > 0) {
			t.Errorf("Window(%s, %s) = %d, %v; want %d", tt.provider, tt.model, w, ok, tt.want)
		}
	}
	if p, ok := c.Price("openai", "gpt-small-ctx"); ok {
		t.Errorf("a window-only entry is priced: %+v", p)
	}
	var nilCat *Catalog
	if _, ok := nilCat.Window("openai", "gpt-4o"); ok {
		t.Error("nil catalog has a window")
	}
}

func TestWindowInvalid(t *testing.T) {
	for _, v := range []string{"-1", "1.5", "1e300", `"128000"`} {
		if _, err := Parse([]byte(`{"m": {"max_input_tokens": ` + v + `}}`)); err == nil {
			t.Errorf("max_input_tokens %s accepted", v)
		}
	}
	c, err := Parse([]byte(`{"m": {"max_input_tokens": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Window("openai", "m"); ok {
		t.Error("a zero window is a window")
	}
}
