package integration

import (
	"fmt"
	"testing"
)

// TestSemanticCacheFallbackEmbedsOnce: a request whose first semantic
// target fails falls back to the next, which looks the request up with
// the embedding already made; the answer is found by similarity in the
// partition of the target that stored it.
func TestSemanticCacheFallbackEmbedsOnce(t *testing.T) {
	emb := newFakeEmbeddings(t, semanticTable())
	failing := newScripted(t, reply{status: 500})
	up := newEchoChat(t)
	loadFresh(t, site{LLM: semanticLLM(emb, ""), Gateway: "custom_host_allow loopback\ncache_size 21MB"})
	cfg := compactJSON(t, fmt.Sprintf(`{"strategy":{"mode":"fallback"},"cache":{"mode":"semantic"},"targets":[%s,%s]}`,
		target(failing.fakeOpenAI, ""), target(up.fakeOpenAI, "")))
	steps := []struct {
		question, status, answer string
		embeds                   int
	}{
		{qFrance, "SEMANTIC MISS", "re: " + qFrance + " [1]", 1},
		{qPara, "SEMANTIC HIT", "re: " + qFrance + " [1]", 2},
	}
	for _, st := range steps {
		resp, raw := do(t, "POST", "/chat/completions", askBody("gpt-4o-mini", st.question), "x-gateway-config", cfg)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		wantHeaders(t, resp, "x-gateway-cache-status", st.status, "x-gateway-last-used-option-index", "config.targets[1]")
		if got := answerOf(t, raw); got != st.answer || emb.calls() != st.embeds {
			t.Fatalf("%s: %q after %d embedding calls, want %q after %d", st.question, got, emb.calls(), st.answer, st.embeds)
		}
	}
	if failing.count() != 2 || up.count() != 1 {
		t.Fatalf("%d calls to the failing target and %d to the answering one", failing.count(), up.count())
	}
}

// TestSemanticCacheCompletions: text completions are embedded by their
// prompt; a paraphrased prompt is answered from the cache.
func TestSemanticCacheCompletions(t *testing.T) {
	emb := newFakeEmbeddings(t, map[string][]float32{qFrance: axis(0), qPara: near(0.97, 1)})
	up := newFakeOpenAI(t)
	loadFresh(t, site{LLM: semanticLLM(emb, ""), Gateway: "custom_host_allow loopback\ncache_size 21MB"})
	cfg := compactJSON(t, target(up, `"cache":{"mode":"semantic"}`))
	for i, st := range []struct{ prompt, status string }{
		{qFrance, "SEMANTIC MISS"},
		{qPara, "SEMANTIC HIT"},
	} {
		resp, raw := do(t, "POST", "/completions", []byte(fmt.Sprintf(`{"model":"gpt-3.5-turbo-instruct","prompt":%q,"max_tokens":5}`, st.prompt)), "x-gateway-config", cfg)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		wantHeaders(t, resp, "x-gateway-cache-status", st.status)
		if up.count() != 1 || emb.calls() != i+1 {
			t.Fatalf("%s: %d provider calls, %d embedding calls", st.prompt, up.count(), emb.calls())
		}
	}
}
