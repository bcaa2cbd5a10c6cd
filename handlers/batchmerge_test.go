package handlers

import (
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
)

// TestMergeKeepsProviderOrder: the provider's batches keep the order of
// its list, those created in one second included, whatever their ids; a
// managed batch goes before a provider's of the same second.
func TestMergeKeepsProviderOrder(t *testing.T) {
	mk := func(spec string) []*batches.Batch {
		var out []*batches.Batch
		for _, f := range strings.Fields(spec) {
			id, sec, _ := strings.Cut(f, "@")
			n := int64(0)
			for _, c := range sec {
				n = n*10 + int64(c-'0')
			}
			out = append(out, &batches.Batch{ID: id, CreatedAt: n})
		}
		return out
	}
	tests := []struct {
		name, ours, theirs, want string
	}{
		{"one second, ids against the list's order", "", "batch_a@5 batch_c@5 batch_b@5", "batch_a batch_c batch_b"},
		{"managed in the same second first", "m1@5", "batch_z@5 batch_a@5", "m1 batch_z batch_a"},
		{"interleaved by second", "m2@7 m1@4", "p3@9 p2@5 p1@5 p0@1", "p3 m2 p2 p1 m1 p0"},
		{"no provider batches", "m2@7 m1@4", "", "m2 m1"},
		{"a provider list out of time order stays as it is", "", "p1@1 p2@9", "p1 p2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, b := range mergeNewestFirst(mk(tt.ours), mk(tt.theirs)) {
				got = append(got, b.ID)
			}
			if strings.Join(got, " ") != tt.want {
				t.Fatalf("%v, want %s", got, tt.want)
			}
		})
	}
}
