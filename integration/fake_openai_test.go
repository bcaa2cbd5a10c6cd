package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// seenRequest is what a fake provider received.
type seenRequest struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// fakeOpenAI is an OpenAI-compatible provider speaking the real wire
// format: chat completions (JSON and SSE), completions, embeddings, audio
// transcriptions (multipart) and an echo for any other path.
type fakeOpenAI struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
	// Hook, when set, handles the request instead of the default logic.
	Hook func(w http.ResponseWriter, r *http.Request, body []byte) bool
}

func newFakeOpenAI(t testing.TB) *fakeOpenAI {
	f := &fakeOpenAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAI) last() seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return seenRequest{}
	}
	return f.seen[len(f.seen)-1]
}

func (f *fakeOpenAI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	if f.Hook != nil && f.Hook(w, r, body) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer sk-test-provider" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		return
	}
	switch r.URL.Path {
	case "/v1/chat/completions":
		var req struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, 400)
			return
		}
		if req.Stream {
			writeChatStream(w, req.Model, []string{"Hel", "lo", "!"}, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%q,"system_fingerprint":"fp_1","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, req.Model)
	case "/v1/completions":
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":%q,"system_fingerprint":"fp_1","choices":[{"text":" world","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`, req.Model)
	case "/v1/embeddings":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2,0.3]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":4,"total_tokens":4}}`)
	case "/v1/audio/transcriptions":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			// the body was already read; re-parse from the copy
		}
		ct := r.Header.Get("Content-Type")
		if !strings.HasPrefix(ct, "multipart/form-data") {
			http.Error(w, "want multipart", 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"text":"multipart bytes=%d"}`, len(body))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", "yes")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"method":%q,"path":%q,"query":%q,"body":%q}`, r.Method, r.URL.Path, r.URL.RawQuery, body)
	}
}

// writeChatStream writes an OpenAI chat completion stream. gate, when set,
// is waited on after the first event, so a test can prove the first event
// reached the client before the upstream finished.
func writeChatStream(w http.ResponseWriter, model string, parts []string, usage bool, gate <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	for i, p := range parts {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%q},\"finish_reason\":null}]}\n\n", model, p)
		fl.Flush()
		if i == 0 && gate != nil {
			<-gate
		}
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", model)
	if usage {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n", model)
	}
	io.WriteString(w, "data: [DONE]\n\n")
	fl.Flush()
}
