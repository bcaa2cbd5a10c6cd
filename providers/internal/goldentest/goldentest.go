// Package goldentest compares translator output with golden files under a
// provider package's testdata directory. Run a provider's tests with
// -update to rewrite the golden outputs after a deliberate change, then
// review the diff: the inputs are provider wire formats written from the
// providers' API references, the outputs are what clients receive.
package goldentest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

var update = flag.Bool("update", false, "rewrite golden output files")

var created = regexp.MustCompile(`"created":\d+`)

// Read returns a testdata file.
func Read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// normalize zeroes timestamps, which differ per run.
func normalize(b []byte) []byte { return created.ReplaceAll(b, []byte(`"created":0`)) }

// canonical re-encodes JSON so key order and spacing do not matter.
func canonical(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(normalize(b), &v); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// JSON compares got with the golden JSON in path.
func JSON(t testing.TB, got []byte, path string) {
	t.Helper()
	if *update {
		var buf bytes.Buffer
		if err := json.Indent(&buf, normalize(got), "", "  "); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, got)
		}
		buf.WriteByte('\n')
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := Read(t, path)
	if g, w := canonical(t, got), canonical(t, want); g != w {
		t.Errorf("%s mismatch\n got: %s\nwant: %s", path, g, w)
	}
}

// Events splits an OpenAI event stream into its data payloads.
func Events(b []byte) []string {
	var out []string
	for _, ev := range strings.Split(string(b), "\n\n") {
		ev = strings.TrimSpace(ev)
		if ev == "" {
			continue
		}
		out = append(out, strings.TrimPrefix(ev, "data: "))
	}
	return out
}

// SSE compares an OpenAI event stream with the golden stream in path,
// event by event, each JSON payload compared canonically.
func SSE(t testing.TB, got []byte, path string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, normalize(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	g, w := Events(got), Events(Read(t, path))
	for i := 0; i < len(g) || i < len(w); i++ {
		var ge, we string
		if i < len(g) {
			ge = g[i]
		}
		if i < len(w) {
			we = w[i]
		}
		if ge == "[DONE]" || we == "[DONE]" || ge == "" || we == "" {
			if ge != we {
				t.Fatalf("%s event %d\n got: %s\nwant: %s", path, i, ge, we)
			}
			continue
		}
		if cg, cw := canonical(t, []byte(ge)), canonical(t, []byte(we)); cg != cw {
			t.Fatalf("%s event %d\n got: %s\nwant: %s", path, i, cg, cw)
		}
	}
}

// RunStream feeds input to a fresh stream converter in pieces of split
// bytes (all at once when split <= 0) and returns what it wrote, the
// usage it reported and Close's error.
func RunStream(tr providers.Translator, c *providers.Call, input []byte, split int) ([]byte, *providers.Usage, error) {
	var out bytes.Buffer
	conv := tr.Stream(c, &out)
	if split <= 0 {
		split = len(input) + 1
	}
	for len(input) > 0 {
		n := min(split, len(input))
		if _, err := conv.Write(input[:n]); err != nil {
			return out.Bytes(), conv.Usage(), err
		}
		input = input[n:]
	}
	err := conv.Close()
	return out.Bytes(), conv.Usage(), err
}

// Accumulate replays an OpenAI event stream through the OpenAI SDK's own
// ChatCompletionAccumulator, as a client would, failing on any chunk the
// SDK cannot parse or accumulate.
func Accumulate(t testing.TB, sse []byte) openai.ChatCompletionAccumulator {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	for _, ev := range Events(sse) {
		if ev == "[DONE]" {
			break
		}
		var ch openai.ChatCompletionChunk
		if err := ch.UnmarshalJSON([]byte(ev)); err != nil {
			t.Fatalf("chunk %s: %v", ev, err)
		}
		if !acc.AddChunk(ch) {
			t.Fatalf("accumulator rejected %s", ev)
		}
	}
	return acc
}
