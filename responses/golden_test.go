package responses

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixed makes a request's ids and clock deterministic.
func fixed(r *Request) *Request {
	r.ID = "resp_test"
	r.CreatedAt = 1700000000
	n := 0
	r.NewID = func(prefix string) string {
		n++
		return prefix + "test_" + strconv.Itoa(n)
	}
	r.Now = func() time.Time { return time.Unix(1700000005, 0) }
	return r
}

func mustParse(t testing.TB, body string) *Request {
	t.Helper()
	r, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return fixed(r)
}

func indent(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("indent: %v\n%s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// golden compares got with the file, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n got: %s\nwant: %s", path, got, want)
	}
}

// TestGoldenRequests checks Responses → Chat for every
// testdata/request/<name>.json against <name>.chat.json, with the
// replayed history of <name>.history.json when present.
func TestGoldenRequests(t *testing.T) {
	files, _ := filepath.Glob("testdata/request/*.json")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".chat.json") || strings.HasSuffix(f, ".history.json") {
			continue
		}
		n++
		name := strings.TrimSuffix(f, ".json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			body, _ := os.ReadFile(f)
			r := mustParse(t, string(body))
			var history []Item
			if h, err := os.ReadFile(name + ".history.json"); err == nil {
				if err := json.Unmarshal(h, &history); err != nil {
					t.Fatal(err)
				}
			}
			chat, err := ToChat(r, r.Conversation(history))
			if err != nil {
				t.Fatalf("ToChat: %v", err)
			}
			golden(t, name+".chat.json", indent(t, chat))
		})
	}
	if n < 5 {
		t.Fatalf("only %d request goldens", n)
	}
}

// answerRequest is the request the answer goldens translate for.
const answerRequest = `{"model":"requested-model","input":"hi","instructions":"Be brief.","metadata":{"k":"v"},"tools":[{"type":"function","name":"get_weather"}],"max_output_tokens":500}`

// TestGoldenAnswers checks Chat → Responses for every
// testdata/answer/<name>.chat.json against <name>.json.
func TestGoldenAnswers(t *testing.T) {
	files, _ := filepath.Glob("testdata/answer/*.chat.json")
	if len(files) < 3 {
		t.Fatalf("only %d answer goldens", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(f, ".chat.json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			chat, _ := os.ReadFile(f)
			resp, err := FromChat(chat, mustParse(t, answerRequest))
			if err != nil {
				t.Fatalf("FromChat: %v", err)
			}
			golden(t, name+".json", indent(t, resp.JSON()))
		})
	}
}

// TestGoldenStreams checks chat SSE → Responses events for every
// testdata/stream/<name>.sse against <name>.responses.sse, feeding the
// input in small pieces so events split across writes.
func TestGoldenStreams(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".responses.sse") {
			continue
		}
		n++
		name := strings.TrimSuffix(f, ".sse")
		t.Run(filepath.Base(name), func(t *testing.T) {
			in, _ := os.ReadFile(f)
			var out bytes.Buffer
			w := NewStreamWriter(&out, mustParse(t, answerRequest))
			for len(in) > 0 {
				k := min(37, len(in))
				if _, err := w.Write(in[:k]); err != nil {
					t.Fatal(err)
				}
				in = in[k:]
			}
			if err := w.Close(nil); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".responses.sse", out.Bytes())
		})
	}
	if n < 5 {
		t.Fatalf("only %d stream goldens", n)
	}
}
