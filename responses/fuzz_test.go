package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// FuzzParseToChat: any body either fails with an apierror or translates
// to valid JSON; never a panic.
func FuzzParseToChat(f *testing.F) {
	files, _ := filepath.Glob("testdata/request/*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) {
				t.Fatalf("non-API error %v", err)
			}
			return
		}
		chat, err := ToChat(r, r.Input)
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) {
				t.Fatalf("non-API error %v", err)
			}
			return
		}
		if !jsonValid(chat) {
			t.Fatalf("invalid chat JSON %s", chat)
		}
	})
}

// FuzzStreamWriter: any chat stream bytes end in exactly one terminal
// event after Close; never a panic.
func FuzzStreamWriter(f *testing.F) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	r, err := Parse([]byte(answerRequest))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		w := NewStreamWriter(&out, r)
		_, _ = w.Write(in)
		_ = w.Close(nil)
		n := bytes.Count(out.Bytes(), []byte("event: response.completed\n")) +
			bytes.Count(out.Bytes(), []byte("event: response.incomplete\n")) +
			bytes.Count(out.Bytes(), []byte("event: response.failed\n"))
		if n != 1 {
			t.Fatalf("%d terminal events for %q", n, in)
		}
		for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && !jsonValid(d) {
				t.Fatalf("invalid event JSON %s", d)
			}
		}
	})
}

func jsonValid(b []byte) bool { return json.Valid(b) }
