package integration

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHardeningMalformed200FallsBack: a 200 that is not a valid answer
// (not JSON, cut JSON, JSON without choices) is a provider failure: the
// fallback target answers instead.
func TestHardeningMalformed200FallsBack(t *testing.T) {
	tests := []struct {
		name, ct, body string
	}{
		{"html page", "text/html", "<html><body>maintenance</body></html>"},
		{"cut json", "application/json", `{"id":"x","choices":[{"index":0,"message":{"role":"assis`},
		{"no choices", "application/json", `{"id":"x","object":"chat.completion"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := newFakeOpenAI(t)
			bad.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
				w.Header().Set("Content-Type", tt.ct)
				io.WriteString(w, tt.body)
				return true
			}
			good := newFakeOpenAI(t)
			loadSite(t, site{})
			resp, raw := chat(t, `{"strategy":{"mode":"fallback"},"targets":[`+target(bad, "")+`,`+target(good, "")+`]}`)
			if resp.StatusCode != 200 || !strings.Contains(string(raw), `"choices"`) {
				t.Fatalf("status %d body %s", resp.StatusCode, raw)
			}
			if bad.count() != 1 || good.count() != 1 {
				t.Fatalf("bad %d good %d calls", bad.count(), good.count())
			}
			if got := resp.Header.Get("x-gateway-last-used-option-index"); got != "config.targets[1]" {
				t.Fatalf("answered by %q", got)
			}
		})
	}
}

// TestHardeningMalformed200Alone: without a fallback the client gets a 502
// envelope quoting a bounded prefix of what the provider sent.
func TestHardeningMalformed200Alone(t *testing.T) {
	bad := newFakeOpenAI(t)
	bad.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>"+strings.Repeat("x", 10000)+"</html>")
		return true
	}
	loadSite(t, site{})
	resp, raw := chat(t, target(bad, ""))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(raw), `"error"`) || !strings.Contains(string(raw), `html`) || len(raw) > 2000 {
		t.Fatalf("status %d body %.400s (%d bytes)", resp.StatusCode, raw, len(raw))
	}
}

// TestHardeningHTMLErrorPage: a provider's non-JSON error page reaches the
// client in the envelope with the provider's status; a pass-through path
// keeps it byte for byte.
func TestHardeningHTMLErrorPage(t *testing.T) {
	const page = "<html><body>503 Service Unavailable</body></html>"
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, page)
		return true
	}
	loadSite(t, site{})
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	resp, raw := do(t, "POST", "/chat/completions", []byte(chatBody), hdr...)
	if resp.StatusCode != 503 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		!strings.Contains(string(raw), `"error"`) || !strings.Contains(string(raw), "503 Service Unavailable") {
		t.Fatalf("status %d ct %q body %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	resp, raw = do(t, "GET", "/some/provider/path", nil, hdr...)
	if resp.StatusCode != 503 || string(raw) != page {
		t.Fatalf("pass-through changed: status %d body %q", resp.StatusCode, raw)
	}
}

// resetAfter answers 200 with chunked JSON, sends part of it and resets
// the connection.
func resetAfter(part string) func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, part)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
		return true
	}
}

// TestHardeningResetChunkedAnswer: a chunked JSON answer cut by a reset
// is never delivered as complete. A held (validated) answer is a 502; a
// passed-through one ends in a broken connection, not a clean end.
func TestHardeningResetChunkedAnswer(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = resetAfter(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`)
	loadSite(t, site{})
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	resp, raw := do(t, "POST", "/chat/completions", []byte(chatBody), hdr...)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(raw), `"error"`) {
		t.Fatalf("held answer: status %d body %s", resp.StatusCode, raw)
	}

	// /responses answers are passed through as they arrive.
	up.Hook = resetAfter(`{"id":"resp_1","object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"Hel`)
	req, _ := http.NewRequest("POST", gatewayURL()+"/responses", strings.NewReader(`{"model":"m","input":"hi"}`))
	req.Header.Set("x-gateway-api-key", gatewayKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("a cut pass-through answer ended cleanly: status %d body %q", res.StatusCode, body)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "EOF") {
		t.Logf("read error: %v", err)
	}
}

// rss returns the process's resident set size in bytes.
func rss(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestHardeningMaxResponseBody: a 200 MB answer held for a timeout is cut
// at max_response_body: a 502, with the process's memory growing far
// less than the answer's size (measured by sampling RSS meanwhile).
func TestHardeningMaxResponseBody(t *testing.T) {
	const answer = 200 << 20
	var sent atomic.Int64
	var declare atomic.Bool
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "application/json")
		if declare.Load() {
			w.Header().Set("Content-Length", strconv.Itoa(answer))
		}
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		copy(chunk, `{"choices":[],"pad":"`)
		for n := 0; n < answer; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return true
			}
			sent.Add(int64(len(chunk)))
		}
		return true
	}
	for _, tt := range []struct {
		name, gateway string
		limit         int64
		declare       bool
	}{
		{"configured 16MB chunked", "custom_host_allow loopback\nmax_response_body 16MiB", 16 << 20, false},
		{"default chunked", "custom_host_allow loopback", 64 << 20, false},
		{"default with content-length", "custom_host_allow loopback", 64 << 20, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loadSite(t, site{Gateway: tt.gateway})
			runtime.GC()
			before := rss(t)
			var peak atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if r := rss(t); r > peak.Load() {
						peak.Store(r)
					}
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			sent.Store(0)
			declare.Store(tt.declare)
			resp, raw := chat(t, `{"request_timeout":60000,"targets":[`+target(up, "")+`]}`)
			close(stop)
			wg.Wait()
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(raw), "max_response_body") {
				t.Fatalf("status %d body %.300s", resp.StatusCode, raw)
			}
			growth := peak.Load() - before
			t.Logf("%s: RSS growth %.1f MB for a %d MB answer (upstream sent %.1f MB before the cut)", tt.name, float64(growth)/(1<<20), answer>>20, float64(sent.Load())/(1<<20))
			// A held buffer grows by doubling: at most the limit plus
			// the half-size buffer it was copied from, and some slack.
			if growth > 2*tt.limit+32<<20 {
				t.Fatalf("RSS grew %d MB", growth>>20)
			}
		})
	}
}
