package handlers

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
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

// TestSSEFilterLineEndings: CRLF and CR streams (valid SSE) pass through
// event by event, byte for byte, with [DONE] seen.
func TestSSEFilterLineEndings(t *testing.T) {
	lf := chunkA + usageChunk + doneChunk
	for _, tt := range []struct{ name, stream string }{
		{"LF", lf},
		{"CRLF", strings.ReplaceAll(lf, "\n", "\r\n")},
		{"CR", strings.ReplaceAll(lf, "\n", "\r")},
	} {
		var out bytes.Buffer
		f := &sseFilter{w: &out}
		first := strings.Index(tt.stream, "data: {\"choices\":[]")
		f.Write([]byte(tt.stream[:first]))
		if out.String() != tt.stream[:first] {
			t.Fatalf("%s: the first event must pass at once, got %q", tt.name, out.String())
		}
		f.Write([]byte(tt.stream[first:]))
		if !f.sawDone || f.usage == nil || f.usage.TotalTokens != 12 {
			t.Fatalf("%s: done=%v usage=%+v", tt.name, f.sawDone, f.usage)
		}
		if err := f.Flush(); err != nil || out.String() != tt.stream {
			t.Fatalf("%s: err %v, got %q", tt.name, err, out.String())
		}
	}
}

func TestUsageFromJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want providers.Usage
	}{
		{"chat with details", `{"prompt_tokens":24,"completion_tokens":40,"total_tokens":64,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":5}}`,
			providers.Usage{PromptTokens: 24, CompletionTokens: 40, TotalTokens: 64, CachedTokens: 8, ReasoningTokens: 5}},
		{"total derived", `{"prompt_tokens":3,"completion_tokens":4}`,
			providers.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}},
		{"responses naming", `{"input_tokens":10,"output_tokens":2,"total_tokens":12,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":2}}`,
			providers.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12, CachedTokens: 1, ReasoningTokens: 2}},
		{"chat naming wins", `{"prompt_tokens":1,"completion_tokens":1,"input_tokens":9,"output_tokens":9}`,
			providers.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}},
		{"embeddings", `{"prompt_tokens":5,"total_tokens":5}`,
			providers.Usage{PromptTokens: 5, TotalTokens: 5}},
		{"empty", `{}`, providers.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := usageFromJSON(gjson.Parse(tc.in)); *got != tc.want {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// countingWriter counts the writes it receives.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// TestSSEFilterOneWritePerRead: the events of one upstream read reach the
// client in one write, as plain reverse_proxy passes them, and an event cut
// across reads goes out with the read that completes it.
func TestSSEFilterOneWritePerRead(t *testing.T) {
	tests := []struct {
		name       string
		reads      []string
		wantWrites int
	}{
		{"three events in one read", []string{chunkA + chunkA + doneChunk}, 1},
		{"event cut across reads", []string{chunkA + chunkA[:10], chunkA[10:] + doneChunk}, 2},
		{"a read with no complete event", []string{chunkA[:10], chunkA[10:], doneChunk}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &countingWriter{}
			f := &sseFilter{w: out}
			for _, r := range tt.reads {
				if _, err := f.Write([]byte(r)); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != strings.Join(tt.reads, "") {
				t.Fatalf("got %q", out.String())
			}
			if out.writes != tt.wantWrites {
				t.Fatalf("%d client writes, want %d", out.writes, tt.wantWrites)
			}
		})
	}
}

func TestHasUsage(t *testing.T) {
	tests := []struct {
		payload string
		want    bool
	}{
		{`{"choices":[{"delta":{"content":"Hi"}}]}`, false},
		{`{"choices":[{"delta":{"content":"Hi"}}],"usage":null}`, false},
		{`{"choices":[],"usage" : null }`, false},
		{`{"choices":[{"delta":{"content":"usage"}}],"usage":null}`, false},
		{`{"choices":[{"delta":{"content":"say \"usage\": 1"}}]}`, false},
		{`{"choices":[],"usage":{"total_tokens":3}}`, true},
		{`{"choices":[{"delta":{"content":"usage"}}],"usage":{"total_tokens":3}}`, true},
		{`{"type":"response.completed","response":{"usage":null}}`, false},
		{`{"type":"response.completed","response":{"usage": {"input_tokens":1}}}`, true},
		{`{"usage":`, true},
	}
	for _, tt := range tests {
		if got := hasUsage([]byte(tt.payload)); got != tt.want {
			t.Errorf("hasUsage(%s) = %v, want %v", tt.payload, got, tt.want)
		}
	}
}

// sameArray records whether each write handed on the caller's own bytes.
type sameArray struct {
	src    []byte
	copied []bool
}

func (s *sameArray) Write(p []byte) (int, error) {
	s.copied = append(s.copied, len(p) > 0 && &p[0] != &s.src[0])
	return len(p), nil
}

// TestSSEFilterWholeReadsNotCopied: a read of whole events, all kept, goes
// to the client as the read's own bytes; one with a dropped event is
// copied, without the dropped event.
func TestSSEFilterWholeReadsNotCopied(t *testing.T) {
	tests := []struct {
		name       string
		read       string
		dropUsage  bool
		wantCopied bool
	}{
		{"all kept", chunkA + chunkA + usageChunk + doneChunk, false, false},
		{"usage chunk dropped", chunkA + usageChunk + chunkA + doneChunk, true, true},
		{"incomplete tail held back", chunkA + chunkA[:7], false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := []byte(tt.read)
			out := &sameArray{src: src}
			f := &sseFilter{w: out, dropUsage: tt.dropUsage}
			if _, err := f.Write(src); err != nil {
				t.Fatal(err)
			}
			if len(out.copied) != 1 || out.copied[0] != tt.wantCopied {
				t.Fatalf("writes copied %v, want one write, copied=%v", out.copied, tt.wantCopied)
			}
		})
	}
}

// TestSSEFilterThreeReads: every pair of cut points, with and without the
// usage chunk dropped, gives the same output (the direct and copying
// paths meet in every order).
func TestSSEFilterThreeReads(t *testing.T) {
	stream := chunkA + usageChunk + chunkA + doneChunk
	for _, drop := range []bool{false, true} {
		want := stream
		if drop {
			want = chunkA + chunkA + doneChunk
		}
		for i := 0; i <= len(stream); i++ {
			for j := i; j <= len(stream); j++ {
				var out bytes.Buffer
				f := &sseFilter{w: &out, dropUsage: drop}
				for _, r := range []string{stream[:i], stream[i:j], stream[j:]} {
					if _, err := f.Write([]byte(r)); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.Flush(); err != nil || out.String() != want {
					t.Fatalf("drop=%v cuts %d,%d: err %v, got %q", drop, i, j, err, out.String())
				}
			}
		}
	}
}

// TestSSEFilterCutMidEvent: a body that ends in the middle of an event
// reaches the client up to its last whole event, so the error event the
// gateway adds starts on its own; a whole last event without its blank
// line gets one.
func TestSSEFilterCutMidEvent(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"half an event", chunkA + chunkA[:20], chunkA},
		{"half a line", chunkA + "data", chunkA},
		{"an event without its blank line", chunkA + strings.TrimSuffix(chunkA, "\n\n"), chunkA + chunkA},
		{"[DONE] without its blank line", chunkA + "data: [DONE]", chunkA + "data: [DONE]"},
	} {
		for split := 0; split <= len(tc.in); split++ {
			var out bytes.Buffer
			f := &sseFilter{w: &out}
			f.Write([]byte(tc.in[:split]))
			f.Write([]byte(tc.in[split:]))
			if err := f.Flush(); err != nil || out.String() != tc.want {
				t.Fatalf("%s, split %d: %v %q, want %q", tc.name, split, err, out.String(), tc.want)
			}
		}
	}
}
