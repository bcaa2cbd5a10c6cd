package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// fakeRT answers every round trip with res (or err), recording the request.
type fakeRT struct {
	res *http.Response
	err error
	got *http.Request
}

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	f.got = r
	return f.res, f.err
}

// chunks is a body that arrives in the given reads, then fails with end
// (io.EOF for a clean end).
type chunks struct {
	parts []string
	end   error
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, c.end
	}
	n := copy(p, c.parts[0])
	c.parts = c.parts[1:]
	return n, nil
}

// flushCounter is a client that records each write and each flush.
type flushCounter struct {
	*httptest.ResponseRecorder
	log []string
}

func (f *flushCounter) Write(p []byte) (int, error) {
	f.log = append(f.log, "w")
	return f.ResponseRecorder.Write(p)
}

func (f *flushCounter) Flush() { f.log = append(f.log, "f") }

func testExecutor(logger *zap.Logger) *executor {
	return &executor{g: &Gateway{logger: logger}, out: &responder{traceID: "trace-1"}}
}

func testCapture(client http.ResponseWriter, call *providers.Call) *capture {
	return &capture{
		client:  client,
		call:    call,
		maxBody: 1 << 20,
		header:  make(http.Header),
		commit: func(status int, h http.Header) {
			for k, v := range h {
				client.Header()[k] = v
			}
			client.WriteHeader(status)
		},
	}
}

func answer(status int, h http.Header, length int64, body io.Reader) *http.Response {
	return &http.Response{StatusCode: status, Header: h, ContentLength: length, Body: io.NopCloser(body)}
}

func TestSend(t *testing.T) {
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	tests := []struct {
		name        string
		res         *http.Response
		rtErr       error
		call        providers.Call
		wantErr     bool
		wantAborted bool
		wantBody    string
		wantLog     string // writes (w) and flushes (f) the client saw
	}{
		{
			name:     "stream flushed after every read",
			res:      answer(200, sse, -1, &chunks{parts: []string{"data: {\"a\":1}\n\n", "data: [DONE]\n\n"}, end: io.EOF}),
			call:     providers.Call{Stream: true, Op: providers.OpChat},
			wantBody: "data: {\"a\":1}\n\ndata: [DONE]\n\n",
			wantLog:  "wfwf",
		},
		{
			name:     "answer of known length not flushed",
			res:      answer(200, http.Header{"Content-Type": {"application/json"}}, 9, &chunks{parts: []string{`{"a":`, `1}`}, end: io.EOF}),
			call:     providers.Call{Op: providers.OpProxy},
			wantBody: `{"a":1}`,
			wantLog:  "ww",
		},
		{
			name:        "body broken after the status is an abort",
			res:         answer(200, sse, -1, &chunks{parts: []string{"data: {\"a\":1}\n\n"}, end: io.ErrUnexpectedEOF}),
			call:        providers.Call{Stream: true, Op: providers.OpChat},
			wantAborted: true,
			wantBody:    "data: {\"a\":1}\n\n",
			wantLog:     "wf",
		},
		{
			name:    "no answer is an error, nothing written",
			rtErr:   errors.New("dial tcp: connection refused"),
			call:    providers.Call{Op: providers.OpChat},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			c := testCapture(client, &tt.call)
			rt := &fakeRT{res: tt.res, err: tt.rtErr}
			req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
			err, aborted := testExecutor(zap.NewNop()).send(rt, c, req)
			if (err != nil) != tt.wantErr || aborted != tt.wantAborted {
				t.Fatalf("err=%v aborted=%v, want err=%v aborted=%v", err, aborted, tt.wantErr, tt.wantAborted)
			}
			if got := client.Body.String(); got != tt.wantBody {
				t.Errorf("client got %q, want %q", got, tt.wantBody)
			}
			if got := strings.Join(client.log, ""); got != tt.wantLog {
				t.Errorf("writes and flushes %q, want %q", got, tt.wantLog)
			}
			if tt.wantErr && c.status != 0 {
				t.Errorf("capture got status %d from a failed round trip", c.status)
			}
		})
	}
}

func TestSendDropsHopHeaders(t *testing.T) {
	h := http.Header{
		"Content-Type":      {"application/json"},
		"X-Request-Id":      {"req-1"},
		"Connection":        {"keep-alive"},
		"Keep-Alive":        {"timeout=5"},
		"Alt-Svc":           {`h3=":443"`},
		"Upgrade":           {"h2c"},
		"Proxy-Connection":  {"keep-alive"},
		"Transfer-Encoding": {"chunked"},
	}
	c := testCapture(httptest.NewRecorder(), &providers.Call{Op: providers.OpProxy})
	rt := &fakeRT{res: answer(200, h, 2, strings.NewReader("{}"))}
	req := httptest.NewRequest(http.MethodGet, "http://provider.test/v1/models", nil)
	if err, aborted := testExecutor(zap.NewNop()).send(rt, c, req); err != nil || aborted {
		t.Fatal(err, aborted)
	}
	for _, k := range hopHeaders {
		if _, ok := c.header[k]; ok {
			t.Errorf("hop-by-hop header %s passed on", k)
		}
	}
	if c.header.Get("X-Request-Id") != "req-1" || c.header.Get("Content-Type") != "application/json" {
		t.Errorf("end-to-end headers lost: %v", c.header)
	}
}

func TestSendHeldAnswerOneAllocation(t *testing.T) {
	body := strings.Repeat("x", 5000)
	c := testCapture(httptest.NewRecorder(), &providers.Call{Op: providers.OpChat})
	c.hold = true
	rt := &fakeRT{res: answer(200, http.Header{"Content-Type": {"application/json"}}, int64(len(body)), &chunks{parts: []string{body[:1000], body[1000:]}, end: io.EOF})}
	req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
	if err, aborted := testExecutor(zap.NewNop()).send(rt, c, req); err != nil || aborted {
		t.Fatal(err, aborted)
	}
	if c.buf.String() != body {
		t.Fatalf("held %d bytes, want %d", c.buf.Len(), len(body))
	}
	if c.buf.Cap() != len(body) {
		t.Errorf("held buffer capacity %d, want exactly the declared length %d", c.buf.Cap(), len(body))
	}
}

func TestSendTooLargeIsAnAbort(t *testing.T) {
	c := testCapture(httptest.NewRecorder(), &providers.Call{Op: providers.OpChat})
	c.hold, c.maxBody = true, 10
	rt := &fakeRT{res: answer(200, http.Header{"Content-Type": {"application/json"}}, -1, strings.NewReader(strings.Repeat("x", 100)))}
	req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
	err, aborted := testExecutor(zap.NewNop()).send(rt, c, req)
	if err != nil || !aborted || !c.tooLarge || c.committed {
		t.Fatalf("err=%v aborted=%v tooLarge=%v committed=%v", err, aborted, c.tooLarge, c.committed)
	}
}

func TestRoundTripDebugLineMasksCredentials(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	c := testCapture(httptest.NewRecorder(), &providers.Call{Op: providers.OpChat})
	rt := &fakeRT{res: answer(200, http.Header{"Content-Type": {"application/json"}}, 2, strings.NewReader("{}"))}
	req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
	req.Header = http.Header{"X-Api-Key": {"sk-secret-1"}, "Authorization": {"Bearer sk-secret-2"}, "Content-Type": {"application/json"}}
	if err, _ := testExecutor(zap.New(core)).send(rt, c, req); err != nil {
		t.Fatal(err)
	}
	entries := logs.FilterMessage("upstream roundtrip").All()
	if len(entries) != 1 {
		t.Fatalf("%d upstream roundtrip lines, want 1", len(entries))
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	buf, err := enc.EncodeEntry(entries[0].Entry, entries[0].Context)
	if err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	if strings.Contains(line, "sk-secret") {
		t.Fatalf("credential in the DEBUG line: %s", line)
	}
	for _, want := range []string{`"upstream":"provider.test"`, `"status":200`, `"Content-Type":["application/json"]`, `"trace_id":"trace-1"`} {
		if !strings.Contains(line, want) {
			t.Errorf("%s missing from %s", want, line)
		}
	}
}

func TestMaskedHeaderHidesCredentials(t *testing.T) {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"X-Api-Key":            {"k1"},
		"Api-Key":              {"k2"},
		"X-Goog-Api-Key":       {"k3"},
		"X-Amz-Security-Token": {"k4"},
		"Authorization":        {"Bearer k5"},
		"Anthropic-Version":    {"2023-06-01"},
	}
	enc := zapcore.NewMapObjectEncoder()
	if err := maskedHeader(h).MarshalLogObject(enc); err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprint(enc.Fields)
	for _, secret := range []string{"k1", "k2", "k3", "k4", "k5"} {
		if strings.Contains(out, secret) {
			t.Errorf("credential %s logged: %s", secret, out)
		}
	}
	for _, kept := range []string{"application/json", "2023-06-01", "REDACTED"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%s missing from %s", kept, out)
		}
	}
	if len(enc.Fields) != len(h) {
		t.Errorf("logged %d headers, want %d", len(enc.Fields), len(h))
	}
}

// TestSendDeclaredLengthTakesNoMemory: a large declared Content-Length
// (within max_response_body) allocates nothing before bytes arrive.
func TestSendDeclaredLengthTakesNoMemory(t *testing.T) {
	c := testCapture(httptest.NewRecorder(), &providers.Call{Op: providers.OpChat})
	c.hold, c.maxBody = true, 64<<20
	rt := &fakeRT{res: answer(200, http.Header{"Content-Type": {"application/json"}}, 60<<20, &chunks{parts: []string{"{}"}, end: io.ErrUnexpectedEOF})}
	req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
	if _, aborted := testExecutor(zap.NewNop()).send(rt, c, req); !aborted {
		t.Fatal("a body shorter than its declared length must be an abort")
	}
	if c.buf.Cap() > 1<<20 {
		t.Fatalf("held buffer of %d bytes allocated for 2 bytes received", c.buf.Cap())
	}
}

// BenchmarkSendHeldAnswer: one held answer read through send, by size
// and whether its length is declared. Small answers keep the first
// buffer (no pooled chunks); a large one of unknown length is read into
// pooled chunks and joined once.
func BenchmarkSendHeldAnswer(b *testing.B) {
	for _, bc := range []struct {
		name    string
		size    int
		declare bool
	}{
		{"5KB declared", 5000, true},
		{"5KB chunked", 5000, false},
		{"200KB chunked", 200 << 10, false},
		{"4MB declared", 4 << 20, true},
		{"4MB chunked", 4 << 20, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(strings.Repeat("x", bc.size))
			length := int64(-1)
			if bc.declare {
				length = int64(bc.size)
			}
			req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
			ex := testExecutor(zap.NewNop())
			h := http.Header{"Content-Type": {"application/json"}}
			if bc.declare {
				h.Set("Content-Length", strconv.Itoa(bc.size))
			}
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			for b.Loop() {
				c := testCapture(nil, &providers.Call{Op: providers.OpChat})
				c.hold, c.maxBody = true, 64<<20
				rt := &fakeRT{res: answer(200, h, length, bytes.NewReader(body))}
				if err, aborted := ex.send(rt, c, req); err != nil || aborted || c.buf.Len() != bc.size {
					b.Fatal(err, aborted, c.buf.Len())
				}
			}
		})
	}
}
