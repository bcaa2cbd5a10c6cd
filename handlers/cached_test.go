package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestCacheable(t *testing.T) {
	tests := []struct {
		method string
		op     providers.Operation
		want   bool
	}{
		{"POST", providers.OpChat, true},
		{"POST", providers.OpCompletions, true},
		{"POST", providers.OpEmbeddings, true},
		{"POST", providers.OpResponses, false},
		{"POST", providers.OpTranscriptions, false},
		{"POST", providers.OpImages, false},
		{"POST", providers.OpProxy, false},
		{"GET", providers.OpModels, false},
	}
	for _, tt := range tests {
		if got := cacheable(tt.method, tt.op); got != tt.want {
			t.Errorf("cacheable(%s, %s) = %v, want %v", tt.method, tt.op, got, tt.want)
		}
	}
}

// TestStreamStoredBeforeDone: a streamed answer is handed to the cache
// before its [DONE] reaches the client, so a client that sends the same
// request as soon as its stream ends finds it cached.
func TestStreamStoredBeforeDone(t *testing.T) {
	const stream = "data: {\"object\":\"chat.completion.chunk\"}\n\ndata: [DONE]\n\n"
	for _, name := range []string{"pass-through", "converted"} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			var atStore string
			c := &capture{client: rec, store: func(body []byte, stream bool) {
				atStore = rec.Body.String()
				if !stream || !strings.Contains(string(body), "[DONE]") {
					t.Errorf("stored %q (stream=%v)", body, stream)
				}
			}}
			c.startTee(1 << 20)
			if name == "pass-through" {
				c.sse = &sseFilter{w: rec, onDone: c.storeStream}
				c.teeWrite([]byte(stream))
				_, _ = c.sse.Write([]byte(stream))
			} else {
				_, _ = flushWriter{w: rec, tee: c}.Write([]byte(stream))
			}
			if !c.stored || strings.Contains(atStore, "[DONE]") || !strings.Contains(rec.Body.String(), "[DONE]") {
				t.Fatalf("stored=%v; the client had %q at store time, %q at the end", c.stored, atStore, rec.Body.String())
			}
		})
	}
}

// TestTeeOverflowIsNotStored: a stream larger than the cache's entry
// limit is passed on but never stored half.
func TestTeeOverflowIsNotStored(t *testing.T) {
	rec := httptest.NewRecorder()
	c := &capture{client: rec, store: func([]byte, bool) { t.Fatal("an incomplete transcript was stored") }}
	c.startTee(8)
	fw := flushWriter{w: rec, tee: c}
	_, _ = fw.Write([]byte("data: {\"a\":\"long event\"}\n\n"))
	_, _ = fw.Write([]byte("data: [DONE]\n\n"))
	if !c.teeFull || rec.Code != http.StatusOK {
		t.Fatalf("teeFull=%v", c.teeFull)
	}
}
