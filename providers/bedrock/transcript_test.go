package bedrock

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// transcriptEvent is one frame of a ConverseStream transcript in testdata:
// an event (":event-type") or an exception (":exception-type"), with its
// JSON payload, as bedrock-runtime sends them.
type transcriptEvent struct {
	Event     string          `json:"event"`
	Exception string          `json:"exception"`
	Payload   json.RawMessage `json:"payload"`
}

// encodeTranscript encodes testdata/<name>.events.json as the binary
// application/vnd.amazon.eventstream body bedrock-runtime sends.
func encodeTranscript(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var events []transcriptEvent
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, e := range events {
		if err := enc.Encode(&buf, frame(e)); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func frame(e transcriptEvent) eventstream.Message {
	var m eventstream.Message
	if e.Exception != "" {
		m.Headers.Set(":exception-type", eventstream.StringValue(e.Exception))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	} else {
		m.Headers.Set(":event-type", eventstream.StringValue(e.Event))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
	}
	m.Payload = e.Payload
	return m
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// jsonEqual reports whether two JSON documents are equal as values.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixedIDs makes ids and timestamps deterministic for the test's duration.
func fixedIDs(t testing.TB) {
	oldID, oldNow := newID, now
	newID = func() string { return "chatcmpl-test" }
	now = func() time.Time { return time.Unix(1700000000, 0) }
	t.Cleanup(func() { newID, now = oldID, oldNow })
}
