package integration

import (
	"encoding/json"
	"net/http"
	"testing"
)

const cohereKey = "co-test-key"

// fakeCohere serves Cohere's v2 chat and embed with bearer
// authentication; chat answers reply, or the transcript when the body
// asks to stream.
func fakeCohere(t testing.TB, reply, transcript []byte) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Header.Get("Authorization") != "Bearer "+cohereKey {
			writeJSON(w, 401, []byte(`{"id":"e1","message":"invalid api token"}`))
			return
		}
		var req struct {
			Model    string            `json:"model"`
			Stream   bool              `json:"stream"`
			Messages []json.RawMessage `json:"messages"`
			Texts    []string          `json:"texts"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
			writeJSON(w, 400, []byte(`{"id":"e2","message":"invalid request: model must be specified"}`))
			return
		}
		switch r.URL.Path {
		case "/v2/chat":
			if req.Stream {
				replay(w, "text/event-stream", transcript)
				return
			}
			writeJSON(w, 200, reply)
		case "/v2/embed":
			writeJSON(w, 200, fixture(t, "cohere", "embed_response.json"))
		default:
			writeJSON(w, 404, []byte(`{"id":"e3","message":"not found"}`))
		}
	})
}
