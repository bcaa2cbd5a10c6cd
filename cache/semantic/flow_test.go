package semantic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
)

// fakeEmbedder returns fixed vectors: texts about one question lie close
// to one axis, at the cosine the table gives.
type fakeEmbedder map[string][]float32

var errOutage = errors.New("embedding target down")

func (f fakeEmbedder) Embed(_ context.Context, text string) ([]float32, error) {
	if v, ok := f[text]; ok {
		return v, nil
	}
	return nil, errOutage
}

// step is the cache step the pipeline runs, written against the
// package's API in the documented order; it returns the cache status
// and the answer.
type step struct {
	exact *cache.Store
	index *Index
	emb   Embedder
}

func (s step) serve(t *testing.T, parts PartitionParts, body string, upstream string) (string, string) {
	t.Helper()
	b := []byte(body)
	key, err := cache.Key(cache.KeyParts{Op: parts.Op, Method: parts.Method, Path: parts.Path, Target: parts.Target, Workspace: parts.Workspace, Namespace: parts.Namespace, Metadata: parts.Metadata, Body: b})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := s.exact.Get(key); ok {
		return cache.StatusHit, string(e.Body)
	}
	part, text, err := Prepare(parts, b)
	var vec []float32
	if err == nil {
		vec, err = s.emb.Embed(context.Background(), text)
	}
	if err == nil {
		if k, _, ok := s.index.Lookup(part, vec, 0); ok {
			if e, ok := s.exact.Get(k); ok {
				return "SEMANTIC HIT", string(e.Body)
			}
			s.index.Remove(part, k)
		}
	}
	// Upstream call, then store: exact entry, and the vector when there is one.
	if s.exact.Set(key, 200, []byte(upstream), time.Hour) && vec != nil {
		if err := s.index.Add(part, vec, key, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	return cache.StatusSemanticMiss, upstream
}

func chat(q string) string {
	return `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"` + q + `"}]}`
}

func TestSemanticCacheFlow(t *testing.T) {
	store, err := cache.New(1<<20, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := step{exact: store, index: NewIndex(Config{}), emb: fakeEmbedder{
		"user: What is the capital of France?":  axis(64, 0),
		"user: Which city is France's capital?": at(64, 0, 0.97),
		"user: What is the capital of Spain?":   at(64, 0, 0.90),
	}}
	base := PartitionParts{Op: "chat", Method: "POST", Path: "/v1/chat/completions", Workspace: "w1", Target: "t", Model: "gpt-4o", Embedder: "e"}
	other := func(f func(*PartitionParts)) PartitionParts { p := base; f(&p); return p }

	steps := []struct {
		name       string
		parts      PartitionParts
		q          string
		wantStatus string
		wantBody   string
	}{
		{"first request is a miss", base, "What is the capital of France?", cache.StatusSemanticMiss, "paris"},
		{"same request is an exact hit", base, "What is the capital of France?", cache.StatusHit, "paris"},
		{"paraphrase above the threshold hits", base, "Which city is France's capital?", "SEMANTIC HIT", "paris"},
		{"question below the threshold misses", base, "What is the capital of Spain?", cache.StatusSemanticMiss, "madrid"},
		{"another workspace never hits", other(func(p *PartitionParts) { p.Workspace = "w2" }), "Which city is France's capital?", cache.StatusSemanticMiss, "w2"},
		{"another namespace never hits", other(func(p *PartitionParts) { p.Namespace = "n" }), "Which city is France's capital?", cache.StatusSemanticMiss, "ns"},
		{"another model never hits", other(func(p *PartitionParts) { p.Model = "gpt-4o-mini" }), "Which city is France's capital?", cache.StatusSemanticMiss, "mini"},
		{"embedding outage is a miss", base, "unknown text", cache.StatusSemanticMiss, "fresh"},
	}
	for _, st := range steps {
		status, body := s.serve(t, st.parts, chat(st.q), st.wantBody)
		if status != st.wantStatus || body != st.wantBody {
			t.Fatalf("%s: got %s %q, want %s %q", st.name, status, body, st.wantStatus, st.wantBody)
		}
	}
}
