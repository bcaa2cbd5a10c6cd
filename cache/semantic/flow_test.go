package semantic

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/shared"
)

// fakeEmbedder returns fixed vectors: texts about one question lie close
// to one axis, at the cosine the table gives; other texts fail.
type fakeEmbedder struct {
	vecs  map[string][]float32
	calls int
}

var errOutage = errors.New("embedding target down")

func (f *fakeEmbedder) Embed(_ context.Context, text string) ([]float32, error) {
	f.calls++
	if v, ok := f.vecs[text]; ok {
		return v, nil
	}
	return nil, errOutage
}

func chat(q string) string { return chatModel("gpt-4o", q) }

func chatModel(model, q string) string {
	return `{"model":"` + model + `","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"` + q + `"}]}`
}

// mix returns cos·e_0 + sin·e_j: vectors of different j are at cosine
// cos_a·cos_b from each other.
func mix(dim int, cos float64, j int) []float32 {
	v := make([]float32, dim)
	v[0] = float32(cos)
	v[j] = float32(math.Sqrt(1 - cos*cos))
	return v
}

type harness struct {
	t     *testing.T
	clk   *clock
	store *cache.Store
	c     *Cache
	emb   *fakeEmbedder
	logs  *observer.ObservedLogs
}

func newHarness(t *testing.T) *harness {
	clk := newClock()
	store, err := cache.New(1<<20, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	emb := &fakeEmbedder{vecs: map[string][]float32{
		"user: What is the capital of France?":  axis(64, 0),
		"user: Which city is France's capital?": mix(64, 0.97, 1),
		"user: What is the capital of Spain?":   mix(64, 0.90, 2),
	}}
	core, logs := observer.New(zap.WarnLevel)
	return &harness{t: t, clk: clk, store: store, emb: emb, logs: logs, c: &Cache{
		Store: shared.Local{Store: store}, Index: NewIndex(Config{Now: clk.Now}),
		Embedder: emb, Logger: zap.New(core), Now: clk.Now,
	}}
}

var base = PartitionParts{Op: "chat", Method: "POST", Path: "/v1/chat/completions", Workspace: "w1", Target: "t", Model: "gpt-4o", Embedder: "e"}

func (h *harness) request(parts PartitionParts, q string, refresh bool) Request {
	model := parts.Model
	if model == "" {
		model = "gpt-4o"
	}
	body := []byte(chatModel(model, q))
	key, err := cache.Key(cache.KeyParts{Op: parts.Op, Method: parts.Method, Path: parts.Path, Target: parts.Target, Workspace: parts.Workspace, Namespace: parts.Namespace, Metadata: parts.Metadata, Body: body})
	if err != nil {
		h.t.Fatal(err)
	}
	return Request{Key: key, Semantic: true, ForceRefresh: refresh, Parts: parts, Body: body}
}

// serve runs the cache step around a fake upstream answering upstream.
func (h *harness) serve(parts PartitionParts, q string, refresh bool, upstream string) (string, string) {
	ctx := context.Background()
	r := h.request(parts, q, refresh)
	res := h.c.Lookup(ctx, r)
	if res.Entry != nil {
		return res.Status, string(res.Entry.Body)
	}
	h.c.Save(ctx, r, res, 200, []byte(upstream), time.Hour)
	return res.Status, upstream
}

func TestSemanticCacheFlow(t *testing.T) {
	h := newHarness(t)
	other := func(f func(*PartitionParts)) PartitionParts { p := base; f(&p); return p }
	steps := []struct {
		name       string
		parts      PartitionParts
		q          string
		refresh    bool
		wantStatus string
		wantBody   string
	}{
		{"first request is a miss", base, "What is the capital of France?", false, cache.StatusSemanticMiss, "paris"},
		{"same request is an exact hit", base, "What is the capital of France?", false, cache.StatusHit, "paris"},
		{"paraphrase above the threshold hits", base, "Which city is France's capital?", false, StatusSemanticHit, "paris"},
		{"the paraphrase is then an exact hit", base, "Which city is France's capital?", false, cache.StatusHit, "paris"},
		{"question below the threshold misses", base, "What is the capital of Spain?", false, cache.StatusSemanticMiss, "madrid"},
		{"another workspace never hits", other(func(p *PartitionParts) { p.Workspace = "w2" }), "Which city is France's capital?", false, cache.StatusSemanticMiss, "w2"},
		{"another namespace never hits", other(func(p *PartitionParts) { p.Namespace = "n" }), "Which city is France's capital?", false, cache.StatusSemanticMiss, "ns"},
		{"another model never hits", other(func(p *PartitionParts) { p.Model = "gpt-4o-mini" }), "Which city is France's capital?", false, cache.StatusSemanticMiss, "mini"},
		{"force refresh skips the lookup", base, "What is the capital of France?", true, cache.StatusRefresh, "paris 2"},
		{"the refreshed answer is served", base, "What is the capital of France?", false, cache.StatusHit, "paris 2"},
		{"embedding outage is a miss", base, "unknown text", false, cache.StatusSemanticMiss, "fresh"},
	}
	for _, st := range steps {
		status, body := h.serve(st.parts, st.q, st.refresh, st.wantBody)
		if status != st.wantStatus || body != st.wantBody {
			t.Fatalf("%s: got %s %q, want %s %q", st.name, status, body, st.wantStatus, st.wantBody)
		}
	}
}

func TestSemanticCacheExpiry(t *testing.T) {
	h := newHarness(t)
	h.serve(base, "What is the capital of France?", false, "paris")
	h.clk.Add(59 * time.Minute)
	if s, _ := h.serve(base, "Which city is France's capital?", false, "x"); s != StatusSemanticHit {
		t.Fatalf("before expiry: %s", s)
	}
	// The paraphrase was stored for the original's remaining minute only.
	h.clk.Add(time.Minute)
	if s, b := h.serve(base, "Which city is France's capital?", false, "new"); s != cache.StatusSemanticMiss || b != "new" {
		t.Fatalf("after expiry: %s %q", s, b)
	}
	// The expired vector was dropped when met; the new one is indexed.
	if n := h.c.Index.Len(); n != 1 {
		t.Fatalf("index holds %d entries, want 1", n)
	}
}

func TestSemanticCacheStaleVectorDropped(t *testing.T) {
	h := newHarness(t)
	h.serve(base, "What is the capital of France?", false, "paris")
	// The answer leaves the exact store (evicted, or expired in Redis)
	// while its vector is still indexed.
	h.store.Set(h.request(base, "What is the capital of France?", false).Key, 200, []byte("x"), time.Nanosecond)
	h.clk.Add(time.Second)
	if s, _ := h.serve(base, "What is the capital of Spain?", false, "madrid"); s != cache.StatusSemanticMiss {
		t.Fatal(s)
	}
	before := h.c.Index.Len()
	if s, _ := h.serve(base, "Which city is France's capital?", false, "paris?"); s != cache.StatusSemanticMiss {
		t.Fatalf("stale vector served: %s", s)
	}
	// The stale vector went, the new answer's vector came.
	if h.c.Index.Len() != before || has(h.c.Index, mustPartition(t, base, "x"), h.request(base, "What is the capital of France?", false).Key) {
		t.Fatal("stale vector not dropped")
	}
}

func mustPartition(t *testing.T, p PartitionParts, q string) Partition {
	part, err := PartitionKey(p, []byte(chat(q)))
	if err != nil {
		t.Fatal(err)
	}
	return part
}

func TestSemanticCacheEmbeddingOutageLoggedOnce(t *testing.T) {
	h := newHarness(t)
	for _, q := range []string{"unknown 1", "unknown 2", "unknown 3"} {
		if s, _ := h.serve(base, q, false, "a"); s != cache.StatusSemanticMiss {
			t.Fatal(s)
		}
	}
	if h.logs.Len() != 1 {
		t.Fatalf("%d log entries, want 1", h.logs.Len())
	}
	h.clk.Add(time.Minute)
	h.serve(base, "unknown 4", false, "a")
	all := h.logs.All()
	if len(all) != 2 || all[1].ContextMap()["failures_not_logged"] != int64(2) {
		t.Fatalf("logs = %+v", all)
	}
}

func TestSemanticCacheExactModeAndIneligible(t *testing.T) {
	h := newHarness(t)
	r := h.request(base, "What is the capital of France?", false)
	r.Semantic = false
	res := h.c.Lookup(context.Background(), r)
	if res.Status != cache.StatusMiss {
		t.Fatal(res.Status)
	}
	h.c.Save(context.Background(), r, res, 200, []byte("a"), time.Hour)
	if h.emb.calls != 0 || h.c.Index.Len() != 0 {
		t.Fatal("simple mode embedded or indexed")
	}
	// An ineligible body (an image) in semantic mode is exact-only.
	img := Request{Key: "k", Semantic: true, Parts: base, Body: []byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`)}
	res = h.c.Lookup(context.Background(), img)
	h.c.Save(context.Background(), img, res, 200, []byte("a"), time.Hour)
	if res.Status != cache.StatusSemanticMiss || h.emb.calls != 0 || h.c.Index.Len() != 0 {
		t.Fatalf("ineligible request: %s, %d calls", res.Status, h.emb.calls)
	}
}
