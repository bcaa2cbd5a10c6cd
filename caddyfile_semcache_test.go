package llmgateway

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestCaddyfileSemanticCache(t *testing.T) {
	tests := []struct {
		name    string
		block   string
		want    map[string]string // gjson path under apps.llm.semantic_cache → raw value
		wantErr string
	}{
		{name: "full", block: "embedding vk-embed text-embedding-3-small\n threshold 0.97\n max_memory 64MiB\n max_entries 500\n embed_timeout 2s",
			want: map[string]string{"embedding.virtual_key": `"vk-embed"`, "embedding.model": `"text-embedding-3-small"`,
				"threshold": "0.97", "max_memory": "67108864", "max_entries": "500", "embed_timeout": "2000000000"}},
		{name: "defaults", block: "embedding vk m", want: map[string]string{"embedding.model": `"m"`, "threshold": "", "max_memory": ""}},
		{name: "no embedding", block: "threshold 0.9", wantErr: "embedding <virtual_key> <model> is required"},
		{name: "embedding without model", block: "embedding vk", wantErr: "wrong argument count"},
		{name: "threshold zero", block: "embedding vk m\n threshold 0", wantErr: "threshold must be a number in (0, 1]"},
		{name: "threshold above one", block: "embedding vk m\n threshold 1.5", wantErr: "threshold must be a number in (0, 1]"},
		{name: "bad size", block: "embedding vk m\n max_memory lots", wantErr: "max_memory: invalid size"},
		{name: "bad entries", block: "embedding vk m\n max_entries -3", wantErr: "max_entries must be a positive integer"},
		{name: "bad timeout", block: "embedding vk m\n embed_timeout soon", wantErr: "embed_timeout: invalid duration"},
		{name: "unknown option", block: "embedding vk m\n similarity 0.9", wantErr: `unknown semantic_cache option "similarity"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := adapt(t, "{\n\tadmin off\n\tllm {\n\t\tsemantic_cache {\n"+tc.block+"\n\t\t}\n\t}\n}\n:0 {\n\trespond ok\n}\n")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc := gjson.GetBytes(cfg, "apps.llm.semantic_cache")
			for path, raw := range tc.want {
				if got := sc.Get(path).Raw; got != raw {
					t.Errorf("%s = %s, want %s (in %s)", path, got, raw, sc.Raw)
				}
			}
		})
	}
	if _, err := adapt(t, "{\n\tllm {\n\t\tsemantic_cache {\n embedding a b\n}\n\t\tsemantic_cache {\n embedding a b\n}\n\t}\n}\n:0 {\n\trespond ok\n}\n"); err == nil || !strings.Contains(err.Error(), "configured twice") {
		t.Fatalf("a second semantic_cache: %v", err)
	}
}
