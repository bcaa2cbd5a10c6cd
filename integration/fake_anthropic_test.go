package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fakeServer is a provider fake that records every request and answers
// with its handler. The Anthropic, Gemini and Cohere fakes are built on
// it; their handlers check each provider's real authentication and paths
// and replay the golden wire transcripts under providers/*/testdata.
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newFakeServer(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeServer {
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		handle(w, r, body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) last() seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return seenRequest{}
	}
	return f.seen[len(f.seen)-1]
}

// fixture reads a provider package's testdata file.
func fixture(t testing.TB, pkg, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../providers/" + pkg + "/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replay writes a provider event stream event by event (split at blank
// lines), flushing each, as the provider does.
func replay(w http.ResponseWriter, contentType string, transcript []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	sep := []byte("\n\n")
	if bytes.Contains(transcript, []byte("\r\n\r\n")) {
		sep = []byte("\r\n\r\n")
	}
	for len(transcript) > 0 {
		i := bytes.Index(transcript, sep)
		n := len(transcript)
		if i >= 0 {
			n = i + len(sep)
		}
		_, _ = w.Write(transcript[:n])
		fl.Flush()
		transcript = transcript[n:]
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// anthropicKey is the provider key the Anthropic fake accepts.
const anthropicKey = "sk-test-provider"

// fakeAnthropic serves the Messages API: it checks x-api-key and
// anthropic-version like Anthropic does, then answers non-stream calls
// with reply and stream calls with the transcript.
func fakeAnthropic(t testing.TB, reply, transcript []byte) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case r.Header.Get("x-api-key") != anthropicKey:
			writeJSON(w, 401, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
		case r.Header.Get("anthropic-version") == "":
			writeJSON(w, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"}}`))
		case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
			writeJSON(w, 404, []byte(`{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`))
		default:
			var req struct {
				Model     string `json:"model"`
				MaxTokens int    `json:"max_tokens"`
				Stream    bool   `json:"stream"`
			}
			if err := json.Unmarshal(body, &req); err != nil || req.MaxTokens == 0 {
				writeJSON(w, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`))
				return
			}
			if req.Model == "claude-unknown" {
				writeJSON(w, 404, []byte(`{"type":"error","error":{"type":"not_found_error","message":"model: claude-unknown"}}`))
				return
			}
			if req.Stream {
				replay(w, "text/event-stream", transcript)
				return
			}
			writeJSON(w, 200, reply)
		}
	})
}

// loadProviderSite loads the default test site for the provider tests.
func loadProviderSite(t testing.TB) {
	t.Helper()
	loadSite(t, site{})
	reloadSafeTransport.CloseIdleConnections()
}

// reloadSafeTransport retries a request that failed at the connection level (EOF
// or reset before any response). Caddy binds each config's listener with
// SO_REUSEPORT, so right after a reload the kernel may still queue a new
// connection on the previous config's socket, which is then closed; the
// connection is reset and, POST not being replayable, Go's transport does
// not retry it. Each retry uses a fresh connection. Provider answers are
// never retried, so this hides no gateway behaviour.
var reloadSafeTransport = http.DefaultTransport.(*http.Transport).Clone()

var reloadSafeClient = &http.Client{Transport: reloadRetry{}}

type reloadRetry struct{}

func (reloadRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := reloadSafeTransport.RoundTrip(req)
		if err == nil || attempt == 4 || !connectionLostOnReload(err) || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		reloadSafeTransport.CloseIdleConnections()
		r2 := req.Clone(req.Context())
		if req.GetBody != nil {
			if r2.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		req = r2
	}
}

func connectionLostOnReload(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// translatedClient is newClient with the retrying transport.
func translatedClient(headers ...string) openai.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(gatewayURL() + "/"),
		option.WithAPIKey("sk-test-provider"),
		option.WithHeader("x-gateway-api-key", gatewayKey),
		option.WithMaxRetries(0),
		option.WithHTTPClient(reloadSafeClient),
	}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, option.WithHeader(headers[i], headers[i+1]))
	}
	return openai.NewClient(opts...)
}

// translatedDo is do with the retrying transport.
func translatedDo(t testing.TB, method, path string, body []byte, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, gatewayURL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-gateway-api-key", gatewayKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := reloadSafeClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}
