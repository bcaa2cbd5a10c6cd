package responses

import (
	"errors"
	"strings"
	"testing"
)

const textChunks = `data: {"id":"c","object":"chat.completion.chunk","model":"gm","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","model":"gm","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}

`

func lastEvent(t *testing.T, stream []byte) string {
	t.Helper()
	events := sdkEvents(t, stream)
	return events[len(events)-1].Type
}

// TestStreamTerminalAlways: whatever way the chat stream ends, the client
// gets exactly one terminal event, and response.failed unless [DONE]
// arrived.
func TestStreamTerminalAlways(t *testing.T) {
	cases := []struct {
		name     string
		chat     string
		closeErr error
		want     string
		message  string
	}{
		{"done", textChunks + "data: [DONE]\n\n", nil, "response.completed", ""},
		{"ended without done", textChunks, nil, "response.failed", "ended before it was complete"},
		{"read error", textChunks, errors.New("connection reset"), "response.failed", "failed before it was complete"},
		{"error event", textChunks + `data: {"error":{"message":"Overloaded","type":"overloaded_error"}}` + "\n\n", nil, "response.failed", "Overloaded"},
		{"rate limit event", `data: {"error":{"message":"slow down","type":"rate_limit_exceeded"}}` + "\n\n", nil, "response.failed", "slow down"},
		{"nothing at all", "", nil, "response.failed", "ended before"},
		{"garbage event", "data: {not json\n\n", nil, "response.failed", "could not read"},
		{"crlf lines", strings.ReplaceAll(textChunks+"data: [DONE]\n\n", "\n", "\r\n"), nil, "response.completed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := translateStream(t, mustParse(t, `{"model":"m","input":"hi"}`), []byte(c.chat), c.closeErr)
			events := sdkEvents(t, out)
			last := events[len(events)-1]
			if last.Type != c.want {
				t.Fatalf("last event %s, want %s", last.Type, c.want)
			}
			if c.message != "" && !strings.Contains(last.Response.Error.Message, c.message) {
				t.Fatalf("error %+v lacks %q", last.Response.Error, c.message)
			}
			if events[0].Type != "response.created" || events[1].Type != "response.in_progress" {
				t.Fatalf("stream starts with %s, %s", events[0].Type, events[1].Type)
			}
		})
	}
}

func TestStreamErrorCode(t *testing.T) {
	out := translateStream(t, mustParse(t, `{"model":"m","input":"hi"}`), []byte(`data: {"error":{"message":"slow down","type":"rate_limit_exceeded"}}`+"\n\n"), nil)
	if e := sdkEvents(t, out); e[len(e)-1].Response.Error.Code != "rate_limit_exceeded" {
		t.Fatalf("code %q", e[len(e)-1].Response.Error.Code)
	}
}

// TestStreamBeforeTerminal: the hook sees the final response before the
// client's terminal event, and its failure turns the end into
// response.failed.
func TestStreamBeforeTerminal(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var out strings.Builder
		w := NewStreamWriter(&out, mustParse(t, `{"model":"m","input":"hi"}`))
		var seen *Response
		w.BeforeTerminal = func(r *Response) error {
			seen = r
			if strings.Contains(out.String(), "response.completed") {
				t.Fatal("terminal event written before the hook ran")
			}
			if fail {
				return errors.New("disk full")
			}
			return nil
		}
		_, _ = w.Write([]byte(textChunks + "data: [DONE]\n\n"))
		_ = w.Close(nil)
		if seen == nil || len(seen.Output) != 1 {
			t.Fatalf("hook saw %+v", seen)
		}
		want := "response.completed"
		if fail {
			want = "response.failed"
		}
		if got := lastEvent(t, []byte(out.String())); got != want {
			t.Fatalf("fail=%v: last event %s", fail, got)
		}
		if !fail && w.Response().Status != "completed" {
			t.Fatalf("Response() %+v", w.Response())
		}
	}
}

// TestStreamIgnoresInputAfterTerminal: bytes after [DONE] or an error do
// not produce events, and Close adds nothing.
func TestStreamIgnoresInputAfterTerminal(t *testing.T) {
	var out strings.Builder
	w := NewStreamWriter(&out, mustParse(t, `{"model":"m","input":"hi"}`))
	_, _ = w.Write([]byte(textChunks + "data: [DONE]\n\n"))
	n := len(out.String())
	_, _ = w.Write([]byte(textChunks))
	_ = w.Close(errors.New("late"))
	if len(out.String()) != n {
		t.Fatalf("output grew after the terminal event")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("client gone") }

func TestStreamWriteError(t *testing.T) {
	w := NewStreamWriter(failingWriter{}, mustParse(t, `{"model":"m","input":"hi"}`))
	if _, err := w.Write([]byte(textChunks)); err == nil {
		t.Fatal("Write hid the client's write error")
	}
	if err := w.Close(nil); err == nil {
		t.Fatal("Close hid the client's write error")
	}
}

// TestStreamLineBound: an endless line without newline ends the stream
// with response.failed instead of growing memory without bound.
func TestStreamLineBound(t *testing.T) {
	var out strings.Builder
	w := NewStreamWriter(&out, mustParse(t, `{"model":"m","input":"hi"}`))
	chunk := []byte("data: " + strings.Repeat("x", 1<<20))
	for range 9 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if got := lastEvent(t, []byte(out.String())); got != "response.failed" {
		t.Fatalf("last event %s", got)
	}
}

// TestStreamFunctionCallWholeArguments: providers that send a call's
// arguments in one piece (Bedrock, Gemini) still give one delta and the
// done events.
func TestStreamFunctionCallWholeArguments(t *testing.T) {
	chat := `data: {"model":"g","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":null}]}

data: {"model":"g","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	events := sdkEvents(t, translateStream(t, mustParse(t, `{"model":"m","input":"hi"}`), []byte(chat), nil))
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(types, " "), want)
	}
	last := events[len(events)-1].Response.Output[0]
	if last.CallID != "call_9" || last.Arguments.OfString != `{"a":1}` || last.Name != "f" {
		t.Fatalf("function call %+v", last)
	}
}

func TestStreamStartEarly(t *testing.T) {
	var out strings.Builder
	w := NewStreamWriter(&out, mustParse(t, `{"model":"m","input":"hi"}`))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "response.in_progress") {
		t.Fatalf("Start wrote %q", out.String())
	}
	_, _ = w.Write([]byte(textChunks + "data: [DONE]\n\n"))
	_ = w.Close(nil)
	if n := strings.Count(out.String(), "event: response.created"); n != 1 {
		t.Fatalf("%d response.created events", n)
	}
	if got := lastEvent(t, []byte(out.String())); got != "response.completed" {
		t.Fatalf("last event %s", got)
	}
}
