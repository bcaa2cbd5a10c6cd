package handlers

import (
	"bytes"
	"testing"
)

const chunkA = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
const usageChunk = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"
const doneChunk = "data: [DONE]\n\n"

func TestSSEFilter(t *testing.T) {
	stream := chunkA + chunkA + usageChunk + doneChunk
	tests := []struct {
		name      string
		dropUsage bool
		want      string
	}{
		{"client asked for usage", false, stream},
		{"gateway asked for usage", true, chunkA + chunkA + doneChunk},
	}
	for _, tt := range tests {
		// Every split point: events may arrive cut anywhere.
		for split := 0; split <= len(stream); split++ {
			var out bytes.Buffer
			f := &sseFilter{w: &out, dropUsage: tt.dropUsage}
			f.Write([]byte(stream[:split]))
			f.Write([]byte(stream[split:]))
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("%s, split %d:\n got %q\nwant %q", tt.name, split, out.String(), tt.want)
			}
			if !f.sawDone || f.usage == nil || f.usage.TotalTokens != 12 || f.usage.CachedTokens != 4 {
				t.Fatalf("%s, split %d: done=%v usage=%+v", tt.name, split, f.sawDone, f.usage)
			}
		}
	}
}

func TestSSEFilterNoDone(t *testing.T) {
	var out bytes.Buffer
	f := &sseFilter{w: &out}
	f.Write([]byte(chunkA + "data: {\"partial\""))
	if f.sawDone {
		t.Fatal("no [DONE] was sent")
	}
	if out.String() != chunkA {
		t.Fatalf("incomplete event must be held back, got %q", out.String())
	}
}

func BenchmarkSSEFilter(b *testing.B) {
	var out bytes.Buffer
	f := &sseFilter{w: &out}
	ev := []byte(chunkA)
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		out.Reset()
		f.Write(ev)
	}
}
