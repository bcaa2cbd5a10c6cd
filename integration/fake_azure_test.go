package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Credentials the fake Azure accepts.
const (
	azureKey = "0123456789abcdef0123456789abcdef"
	// azureEntraToken has a JWT's shape (header.payload.signature).
	azureEntraToken = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2NvZ25pdGl2ZXNlcnZpY2VzLmF6dXJlLmNvbSJ9.c2lnbmF0dXJl"
)

// fakeAzure serves Azure OpenAI's routes (/openai/deployments/{d}/…
// with api-version, /openai/v1/…) and Azure AI endpoints' (/v1/…,
// /models/…), replaying the responses in providers/azure/testdata. It
// checks the api-key header (or an Entra bearer token), the deployment and
// the api-version, answering mistakes as Azure does.
type fakeAzure struct {
	*httptest.Server
	t    testing.TB
	mu   sync.Mutex
	seen []seenRequest
}

// azureDeployments are the deployments of the fake resource.
var azureDeployments = map[string]bool{"dep-main": true, "dep-mini": true, "emb-small": true}

var azureVersions = map[string]bool{"2024-10-21": true, "2024-08-01-preview": true, "2024-02-01": true, "2024-05-01-preview": true}

func newFakeAzure(t testing.TB) *fakeAzure {
	f := &fakeAzure{t: t}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAzure) last() seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return seenRequest{}
	}
	return f.seen[len(f.seen)-1]
}

func (f *fakeAzure) fixture(name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "providers", "azure", "testdata", name))
	if err != nil {
		f.t.Errorf("fixture %s: %v", name, err)
	}
	return b
}

func (f *fakeAzure) reply(w http.ResponseWriter, status int, fixture string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("apim-request-id", "0f8a3a3c-0000-4000-8000-000000000000")
	w.WriteHeader(status)
	w.Write(f.fixture(fixture))
}

func (f *fakeAzure) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()

	if r.Header.Get("api-key") != azureKey && r.Header.Get("Authorization") != "Bearer "+azureEntraToken &&
		!(strings.HasPrefix(r.URL.Path, "/v1/") && r.Header.Get("Authorization") == "Bearer "+azureKey) {
		f.reply(w, http.StatusUnauthorized, "error_401.json")
		return
	}
	version := r.URL.Query().Get("api-version")
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, "/openai/deployments/"):
		dep, op, _ := strings.Cut(strings.TrimPrefix(path, "/openai/deployments/"), "/")
		if !azureVersions[version] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":"404","message":"Resource not found"}}`)
			return
		}
		if !azureDeployments[dep] {
			f.reply(w, http.StatusNotFound, "error_404_deployment.json")
			return
		}
		f.operation(w, op, body)
	case strings.HasPrefix(path, "/openai/v1/"):
		// The v1 API routes on the body's model, which names a deployment.
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		if version != "" && version != "preview" || !azureDeployments[req.Model] {
			f.reply(w, http.StatusNotFound, "error_404_deployment.json")
			return
		}
		f.operation(w, strings.TrimPrefix(path, "/openai/v1/"), body)
	case strings.HasPrefix(path, "/v1/"):
		f.operation(w, strings.TrimPrefix(path, "/v1/"), body)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeAzure) operation(w http.ResponseWriter, op string, body []byte) {
	switch op {
	case "chat/completions":
		var req struct {
			Stream        bool `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if !req.Stream {
			f.reply(w, http.StatusOK, "chat_completion.json")
			return
		}
		f.stream(w, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	case "embeddings":
		f.reply(w, http.StatusOK, "embeddings.json")
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// stream replays chat_stream.sse event by event, leaving out the usage
// chunk unless it was asked for, as Azure does.
func (f *fakeAzure) stream(w http.ResponseWriter, usage bool) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	sc := bufio.NewScanner(bytes.NewReader(f.fixture("chat_stream.sse")))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || (!usage && strings.Contains(line, `"usage":`)) {
			continue
		}
		io.WriteString(w, line+"\n\n")
		w.(http.Flusher).Flush()
	}
}
