// Helpers of the managed-batch hardening tests (issue 21): a provider
// that counts its connections, raw HTTP against any route's base URL,
// and batch polling.

package integration

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// countingProvider is an OpenAI-compatible chat provider on loopback
// that counts the connections made to it and the calls it answered.
type countingProvider struct {
	*httptest.Server
	conns, calls atomic.Int32
	// answer, when set, replaces the default chat completion body.
	answer func(call int32) []byte
	// hold, when set, runs before each answer.
	hold func(call int32)
}

func newCountingProvider(t testing.TB) *countingProvider {
	p := &countingProvider{}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := p.calls.Add(1)
		if p.hold != nil {
			p.hold(n)
		}
		body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"internal answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
		if p.answer != nil {
			body = p.answer(n)
		}
		writeJSON(w, 200, body)
	}))
	p.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.conns.Add(1)
		}
	}
	p.Start()
	t.Cleanup(p.Close)
	return p
}

// openaiBatchLines is n chat lines for an OpenAI-format provider, each
// with pad bytes of prompt.
func openaiBatchLines(n, pad int) []byte {
	var b bytes.Buffer
	filler := strings.Repeat("x", pad)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi %d %s"}]}}`+"\n", i, i, filler)
	}
	return b.Bytes()
}

// bcall sends a request with the test gateway key to base (a route's URL
// up to and including /v1) and returns the status and body.
func bcall(t testing.TB, method, base, path string, body []byte, contentType string, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-gateway-api-key", gatewayKey)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := reloadSafeClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// uploadBatchFile stores content in the gateway's file store (no
// provider header: the gateway keeps it) and returns its id.
func uploadBatchFile(t testing.TB, base string, content []byte, headers ...string) string {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(content)
	_ = mw.Close()
	status, body := bcall(t, http.MethodPost, base, "/files", buf.Bytes(), mw.FormDataContentType(), headers...)
	id := gjson.GetBytes(body, "id").Str
	if status != 200 || !strings.HasPrefix(id, "file-gw") {
		t.Fatalf("upload: %d %s", status, body)
	}
	return id
}

// createBatch creates a managed batch over fileID with the routing
// headers given; it returns the status and the answer.
func createBatch(t testing.TB, base, fileID string, headers ...string) (int, gjson.Result) {
	t.Helper()
	status, body := bcall(t, http.MethodPost, base, "/batches",
		[]byte(`{"input_file_id":"`+fileID+`","endpoint":"/v1/chat/completions","completion_window":"immediate"}`), "application/json", headers...)
	return status, gjson.ParseBytes(body)
}

// mustCreateBatch is createBatch that fails the test on anything but 200.
func mustCreateBatch(t testing.TB, base, fileID string, headers ...string) string {
	t.Helper()
	status, b := createBatch(t, base, fileID, headers...)
	if status != 200 || b.Get("id").Str == "" {
		t.Fatalf("create: %d %s", status, b.Raw)
	}
	return b.Get("id").Str
}

// waitBatchDone polls a batch until it is terminal (a safety bound, not
// a timing assertion).
func waitBatchDone(t testing.TB, base, id string, headers ...string) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body := bcall(t, http.MethodGet, base, "/batches/"+id, nil, "", headers...)
		b := gjson.ParseBytes(body)
		if status != 200 {
			t.Fatalf("get batch: %d %s", status, body)
		}
		switch b.Get("status").Str {
		case "completed", "failed", "cancelled", "expired":
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s stuck in %s", id, b.Get("status").Str)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resultLines returns the lines of a result file ("" id: none).
func resultLines(t testing.TB, base, id string) []gjson.Result {
	t.Helper()
	if id == "" {
		return nil
	}
	status, body := bcall(t, http.MethodGet, base, "/files/"+id+"/content", nil, "")
	if status != 200 {
		t.Fatalf("file %s: %d %s", id, status, body)
	}
	var out []gjson.Result
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if l != "" {
			out = append(out, gjson.Parse(l))
		}
	}
	return out
}

// checkCountsMatchFiles fails unless request_counts are the lines in the
// batch's output and error files; it returns both files' lines.
func checkCountsMatchFiles(t testing.TB, base string, b gjson.Result) (out, errs []gjson.Result) {
	t.Helper()
	out = resultLines(t, base, b.Get("output_file_id").Str)
	errs = resultLines(t, base, b.Get("error_file_id").Str)
	c := b.Get("request_counts")
	if int(c.Get("completed").Int()) != len(out) || int(c.Get("failed").Int()) != len(errs) {
		t.Fatalf("counts %s, files hold %d output and %d error lines", c.Raw, len(out), len(errs))
	}
	return out, errs
}
