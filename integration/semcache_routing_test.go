package integration

import (
	"fmt"
	"strings"
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

// TestSemanticCacheBadEmbeddingAnswers: an embeddings answer that is too
// large, malformed, too deep or out of bounds is a cache miss: the request
// is answered by the provider, nothing is indexed (a second question with
// the same answer from the embedder misses too), and the answer is still
// stored exactly. The first case, a good answer, shows the difference.
func TestSemanticCacheBadEmbeddingAnswers(t *testing.T) {
	emb := newFakeEmbeddings(t, semanticTable())
	up := newEchoChat(t)
	loadFresh(t, site{LLM: semanticLLM(emb, ""), Gateway: "custom_host_allow loopback\ncache_size 21MB"})
	cfg := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"semantic"}`))
	many := strings.Repeat("0.5,", 9000) + "0.5"
	tests := []struct {
		name, raw string
		second    string // cache status of the second question
	}{
		{"a good answer", `{"data":[{"index":0,"embedding":[1,0,0]}]}`, "SEMANTIC HIT"},
		{"larger than 1 MiB", `{"data":[{"index":0,"embedding":[0,1,0]}],"pad":"` + strings.Repeat("x", 1<<20) + `"}`, "SEMANTIC MISS"},
		{"not JSON", `{"data":[{"index":0,"embedding":[0,0,1],`, "SEMANTIC MISS"},
		{"nested too deep", strings.Repeat(`{"a":`, 200_000) + "1" + strings.Repeat("}", 200_000), "SEMANTIC MISS"},
		{"more than 8192 dimensions", `{"data":[{"index":0,"embedding":[` + many + `]}]}`, "SEMANTIC MISS"},
		{"not numbers", `{"data":[{"index":0,"embedding":["a","b"]}]}`, "SEMANTIC MISS"},
		{"all zero", `{"data":[{"index":0,"embedding":[0,0,0,0]}]}`, "SEMANTIC MISS"},
		{"no data", `{"object":"list"}`, "SEMANTIC MISS"},
	}
	calls := 0
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emb.setRaw(tc.raw)
			q1, q2 := fmt.Sprintf("embedding case %d", i), fmt.Sprintf("embedding case %d, again", i)
			for _, st := range []struct{ q, want string }{{q1, "SEMANTIC MISS"}, {q2, tc.second}, {q1, "HIT"}} {
				resp, raw := do(t, "POST", "/chat/completions", askBody("gpt-4o-mini", st.q), "x-gateway-config", cfg)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, raw)
				}
				wantHeaders(t, resp, "x-gateway-cache-status", st.want)
				if st.want == "SEMANTIC MISS" {
					calls++
				}
			}
			if up.count() != calls {
				t.Fatalf("%d provider calls, want %d", up.count(), calls)
			}
		})
	}
	emb.setRaw("")
	if !strings.Contains(readLog(t), "embedding failed, serving as a cache miss") {
		t.Fatal("the failures were not logged")
	}
}
