package handlers

import (
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
)

func TestJobArea(t *testing.T) {
	tests := []struct{ path, area, rest string }{
		{"/files", "files", ""},
		{"/files/file-1/content", "files", "file-1/content"},
		{"/batches/", "batches", ""},
		{"/batches/b1/cancel", "batches", "b1/cancel"},
		{"/fine_tuning/jobs", "fine_tuning", "jobs"},
		{"/filesx", "", ""},
		{"/chat/completions", "", ""},
		{"/batches2", "", ""},
	}
	for _, tt := range tests {
		if area, rest := jobArea(tt.path); area != tt.area || rest != tt.rest {
			t.Errorf("jobArea(%q) = %q, %q; want %q, %q", tt.path, area, rest, tt.area, tt.rest)
		}
	}
}

func TestPageBatches(t *testing.T) {
	var bs []*batches.Batch
	for _, id := range []string{"e", "d", "c", "b", "a"} {
		bs = append(bs, &batches.Batch{ID: id})
	}
	tests := []struct {
		after string
		limit int
		want  string
		more  bool
	}{
		{"", 2, "ed", true},
		{"d", 2, "cb", true},
		{"b", 2, "a", false},
		{"a", 2, "", false},
		{"unknown", 10, "edcba", false},
		{"", 5, "edcba", false},
	}
	for _, tt := range tests {
		p := pageBatches(bs, tt.after, tt.limit)
		var got strings.Builder
		for _, b := range p.Data {
			got.WriteString(b.ID)
		}
		if got.String() != tt.want || p.HasMore != tt.more {
			t.Errorf("after %q limit %d: %q more %v; want %q more %v", tt.after, tt.limit, got.String(), p.HasMore, tt.want, tt.more)
		}
		if len(p.Data) > 0 && (*p.FirstID != p.Data[0].ID || *p.LastID != p.Data[len(p.Data)-1].ID) {
			t.Errorf("after %q: first/last ids wrong", tt.after)
		}
		if len(p.Data) == 0 && (p.FirstID != nil || p.LastID != nil) {
			t.Errorf("after %q: ids on an empty page", tt.after)
		}
	}
}

// TestRouteKey: a managed batch's route is known across reloads by its
// llm_gateway block; routes that differ in any option (the egress policy
// above all) have different keys.
func TestRouteKey(t *testing.T) {
	key := func(g *Gateway) string {
		k, err := routeKey(g)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	public := key(&Gateway{MaxRequestBody: DefaultMaxRequestBody})
	if again := key(&Gateway{MaxRequestBody: DefaultMaxRequestBody, routeKey: "ignored"}); again != public {
		t.Fatalf("same block, keys %s and %s", public, again)
	}
	for name, g := range map[string]*Gateway{
		"egress":    {MaxRequestBody: DefaultMaxRequestBody, CustomHostAllow: []string{"loopback"}},
		"transport": {MaxRequestBody: DefaultMaxRequestBody, Transport: []byte(`{"dial_timeout":"1s"}`)},
		"limit":     {MaxRequestBody: 1 << 20},
	} {
		if key(g) == public {
			t.Errorf("%s: a different block has the same key", name)
		}
	}
}
