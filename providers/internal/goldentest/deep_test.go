package goldentest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/cohere"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

// TestStreamDeepEventIsAnError feeds every SSE-based stream translator an
// event nested seven million levels deep (7 MB, under the 16 MB event bound), as a hostile custom host could send:
// the translator must end the stream with an error event, without a
// recursive walk of the event (which would exhaust the stack).
func TestStreamDeepEventIsAnError(t *testing.T) {
	deep := "data: " + strings.Repeat("[", 7_000_000) + "\n\n"
	for name, tr := range map[string]providers.Translator{
		"anthropic": anthropic.Chat{Provider: anthropic.Slug},
		"cohere":    mustTranslator(cohere.Slug),
		"gemini":    gemini.Chat{Provider: gemini.Slug},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := goldentest.RunStream(tr, &providers.Call{Stream: true, Model: "m"}, []byte(deep), 0)
			if err == nil && !bytes.Contains(out, []byte(`"error"`)) {
				t.Fatalf("no error for a seven-million-deep event; output %q", out[:min(len(out), 200)])
			}
		})
	}
}

func mustTranslator(slug string) providers.Translator {
	p, ok := providers.Lookup(slug)
	if !ok {
		panic("no provider " + slug)
	}
	return p.Translator(providers.OpChat)
}
