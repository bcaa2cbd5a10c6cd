package integration

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// benchSeq numbers the questions of the benchmarks, so no two requests
// of a run ask the same.
var benchSeq int

// benchCache runs b.N chat requests through the gateway, each asking
// question(n) for a new n, and checks each answer's cache status.
func benchCache(b *testing.B, cfg, status string, question func(n int) string) {
	client := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchSeq++
		cacheRequest(b, client, cfg, question(benchSeq), status)
	}
}

// cacheRequest sends one chat request; status "" accepts any cache status.
func cacheRequest(b *testing.B, client *http.Client, cfg, question, status string) {
	req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", bytes.NewReader(askBody("gpt-4o-mini", question)))
	req.Header = http.Header{
		"Content-Type":      {"application/json"},
		"X-Gateway-Api-Key": {gatewayKey},
		"X-Gateway-Config":  {cfg},
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("x-gateway-cache-status"); resp.StatusCode != 200 || (status != "" && got != status) {
		b.Fatalf("status %d, cache %q, want %q", resp.StatusCode, got, status)
	}
}

// BenchmarkGatewayCache measures whole requests through the gateway with
// the response cache: an exact hit, a semantic hit (a new paraphrase each
// time: exact miss, embedding call to a local fake, similarity search,
// re-store) and a semantic miss (the same plus the provider call, the
// store and the indexing). Vectors have 256 dimensions.
func BenchmarkGatewayCache(b *testing.B) {
	const dims = 256
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	anchor := random()
	emb := newFakeEmbeddings(b, nil)
	emb.gen = func(text string) []float32 {
		if strings.Contains(text, "paraphrase") {
			// About 0.99 from the anchor.
			v := random()
			for i := range v {
				v[i] = anchor[i]*10 + v[i]
			}
			return v
		}
		if strings.Contains(text, "anchor") {
			return anchor
		}
		return random()
	}
	up := newFakeOpenAI(b)
	loadSite(b, site{LLM: semanticLLM(emb, "max_entries 100000"), Gateway: "custom_host_allow loopback\ncache_size 64MB"})
	simple := compactJSON(b, target(up, `"cache":{"mode":"simple"}`))
	semantic := compactJSON(b, target(up, `"cache":{"mode":"semantic"}`))
	cacheRequest(b, http.DefaultClient, simple, "anchor", "")
	cacheRequest(b, http.DefaultClient, semantic, "anchor for the semantic cache", "SEMANTIC MISS")
	b.Run("exact_hit", func(b *testing.B) {
		benchCache(b, simple, "HIT", func(int) string { return "anchor" })
	})
	b.Run("semantic_hit", func(b *testing.B) {
		benchCache(b, semantic, "SEMANTIC HIT", func(i int) string { return "paraphrase " + strconv.Itoa(i) })
	})
	b.Run("semantic_miss", func(b *testing.B) {
		benchCache(b, semantic, "SEMANTIC MISS", func(i int) string { return "question " + strconv.Itoa(i) })
	})
}
