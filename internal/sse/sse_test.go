package sse

import (
	"strings"
	"testing"
)

type got struct {
	raw  strings.Builder
	data []string
	name []string
}

func (g *got) fn(ev *Event) bool {
	g.raw.Write(ev.Raw)
	if ev.HasData {
		g.data = append(g.data, string(ev.Data))
		g.name = append(g.name, string(ev.Name))
	}
	return true
}

func TestSplitterLineEndings(t *testing.T) {
	lf := "event: a\ndata: {\"x\":1}\n\n: comment\ndata: two\ndata: lines\n\ndata: [DONE]\n\n"
	tests := []struct {
		name   string
		stream string
	}{
		{"LF", lf},
		{"CRLF", strings.ReplaceAll(lf, "\n", "\r\n")},
		{"CR", strings.ReplaceAll(lf, "\n", "\r")},
	}
	wantData := []string{`{"x":1}`, "two\nlines", "[DONE]"}
	wantName := []string{"a", "", ""}
	for _, tt := range tests {
		for _, noRaw := range []bool{false, true} {
			// Every split point: events may arrive cut anywhere.
			for split := 0; split <= len(tt.stream); split++ {
				var g got
				s := Splitter{NoRaw: noRaw}
				if err := s.Feed([]byte(tt.stream[:split]), g.fn); err != nil {
					t.Fatal(err)
				}
				if err := s.Feed([]byte(tt.stream[split:]), g.fn); err != nil {
					t.Fatal(err)
				}
				if len(g.data) != 3 {
					t.Fatalf("%s split %d: events must be complete before End, got %q", tt.name, split, g.data)
				}
				s.End(g.fn)
				if strings.Join(g.data, "|") != strings.Join(wantData, "|") || strings.Join(g.name, "|") != strings.Join(wantName, "|") {
					t.Fatalf("%s split %d: data %q names %q", tt.name, split, g.data, g.name)
				}
				if !noRaw && g.raw.String() != tt.stream {
					t.Fatalf("%s split %d: raw bytes differ:\n got %q\nwant %q", tt.name, split, g.raw.String(), tt.stream)
				}
			}
		}
	}
}

func TestSplitterEnd(t *testing.T) {
	tests := []struct {
		name, stream string
		data         []string
	}{
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"trailing newline only", "data: a\n\ndata: b\n", []string{"a", "b"}},
		{"nothing pending", "data: a\n\n", []string{"a"}},
	}
	for _, tt := range tests {
		var g got
		s := Splitter{}
		_ = s.Feed([]byte(tt.stream), g.fn)
		s.End(g.fn)
		if strings.Join(g.data, "|") != strings.Join(tt.data, "|") || g.raw.String() != tt.stream {
			t.Fatalf("%s: data %q raw %q", tt.name, g.data, g.raw.String())
		}
	}
}

func TestSplitterJSONLines(t *testing.T) {
	var g got
	s := Splitter{JSONLines: true, NoRaw: true}
	_ = s.Feed([]byte("{\"a\":1}\r\n{\"b\":2}\n{\"c\":3}"), g.fn)
	s.End(g.fn)
	if strings.Join(g.data, "|") != `{"a":1}|{"b":2}|{"c":3}` {
		t.Fatalf("got %q", g.data)
	}
}

func TestSplitterLimit(t *testing.T) {
	s := Splitter{MaxEvent: 16}
	err := s.Feed([]byte("data: "+strings.Repeat("x", 32)), func(*Event) bool { return true })
	if err != ErrEventTooLarge {
		t.Fatalf("err = %v", err)
	}
}

func TestSplitterStop(t *testing.T) {
	n := 0
	s := Splitter{}
	_ = s.Feed([]byte("data: a\n\ndata: b\n\n"), func(*Event) bool { n++; return false })
	s.End(func(*Event) bool { n++; return true })
	if n != 1 || !s.Stopped() {
		t.Fatalf("n=%d stopped=%v", n, s.Stopped())
	}
}

func BenchmarkSplitter(b *testing.B) {
	ev := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n")
	s := Splitter{}
	fn := func(*Event) bool { return true }
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		_ = s.Feed(ev, fn)
	}
}

// Terminate ends an event without its blank line in the event's own line
// ending, and leaves an ended one as it is.
func TestTerminate(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "",
		"data: x":            "data: x\n\n",
		"data: x\n":          "data: x\n\n",
		"data: x\r\n":        "data: x\r\n\r\n",
		"data: x\r":          "data: x\r\r",
		"data: x\n\n":        "data: x\n\n",
		"data: x\r\n\r\n":    "data: x\r\n\r\n",
		"event: e\ndata: {}": "event: e\ndata: {}\n\n",
	} {
		if got := string(Terminate([]byte(in))); got != want {
			t.Errorf("Terminate(%q) = %q, want %q", in, got, want)
		}
	}
}
