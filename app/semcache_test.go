package app

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestSemanticCacheConfigChecked(t *testing.T) {
	ok := SemanticCacheConfig{Embedding: EmbeddingTarget{VirtualKey: "vk", Model: "m"}}
	with := func(f func(*SemanticCacheConfig)) *SemanticCacheConfig { c := ok; f(&c); return &c }
	tests := []struct {
		name    string
		sc      *SemanticCacheConfig
		wantErr string
	}{
		{"none", nil, ""},
		{"valid", &ok, ""},
		{"no virtual key", with(func(c *SemanticCacheConfig) { c.Embedding.VirtualKey = "" }), "needs a virtual key"},
		{"unknown virtual key", with(func(c *SemanticCacheConfig) { c.Embedding.VirtualKey = "nope" }), `virtual key "nope" is not configured`},
		{"no model", with(func(c *SemanticCacheConfig) { c.Embedding.Model = "" }), "needs a model"},
		{"threshold", with(func(c *SemanticCacheConfig) { c.Threshold = 1.2 }), "threshold"},
		{"memory", with(func(c *SemanticCacheConfig) { c.MaxMemory = -1 }), "max_memory"},
		{"entries", with(func(c *SemanticCacheConfig) { c.MaxEntries = 2_000_000 }), "max_entries"},
		{"timeout", with(func(c *SemanticCacheConfig) { c.EmbedTimeout = caddy.Duration(time.Hour) }), "embed_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &App{VirtualKeys: map[string]*providers.Settings{"vk": {Provider: "openai"}}}
			a.SemanticCache = tt.sc
			err := a.provisionCaches()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestSemanticIndexPooled: the index outlives a reload (a second config
// with the same bounds gets the same index), and other bounds get another.
func TestSemanticIndexPooled(t *testing.T) {
	a := &App{}
	if s, ix, release, err := a.SemanticIndex(); s != nil || ix != nil || err != nil {
		t.Fatal("an index without semantic_cache")
	} else {
		release()
	}
	a.SemanticCache = &SemanticCacheConfig{Embedding: EmbeddingTarget{VirtualKey: "vk", Model: "m"}, MaxEntries: 77, Threshold: 0.9}
	s1, ix1, rel1, err := a.SemanticIndex()
	if err != nil || s1.VirtualKey != "vk" || s1.Model != "m" || s1.Threshold != 0.9 {
		t.Fatalf("%+v %v", s1, err)
	}
	if err := ix1.Add("p", []float32{1, 0}, "k", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, ix2, rel2, _ := a.SemanticIndex() // the next config, provisioned before the old one is cleaned up
	rel1()
	if ix2 != ix1 || ix2.Len() != 1 {
		t.Fatal("the index did not survive the reload")
	}
	b := &App{}
	b.SemanticCache = &SemanticCacheConfig{Embedding: EmbeddingTarget{VirtualKey: "vk", Model: "m"}, MaxEntries: 78}
	_, ix3, rel3, _ := b.SemanticIndex()
	if ix3 == ix2 {
		t.Fatal("other bounds share the index")
	}
	rel2()
	rel3()
}
