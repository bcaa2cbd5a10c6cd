package integration

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// TestHardening3UpstreamContentType: the gateway sends JSON it parsed as
// application/json whatever the client declared. A vLLM-style server
// (FastAPI) answers 422 to a form-encoded body; curl -d sends one by
// default. A multipart upload keeps its own Content-Type and boundary.
func TestHardening3UpstreamContentType(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if ct := r.Header.Get("Content-Type"); r.URL.Path != "/v1/audio/transcriptions" && ct != "application/json" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"detail":[{"type":"model_attributes_type","msg":"Input should be a valid dictionary","content_type":"`+ct+`"}]}`)
			return true
		}
		return false
	}
	loadSite(t, site{})
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	for _, tt := range []struct {
		name, path, ct, body, want string
	}{
		{"curl -d chat", "/chat/completions", "application/x-www-form-urlencoded", chatBody, `"chat.completion"`},
		{"text/plain chat", "/chat/completions", "text/plain", chatBody, `"chat.completion"`},
		{"no content type", "/chat/completions", "", chatBody, `"chat.completion"`},
		{"curl -d embeddings", "/embeddings", "application/x-www-form-urlencoded", `{"model":"text-embedding-3-small","input":"hi"}`, `"embedding"`},
		{"curl -d completions", "/completions", "application/x-www-form-urlencoded", `{"model":"gpt-3.5-turbo-instruct","prompt":"hi"}`, `"text_completion"`},
		{"json with charset", "/chat/completions", "application/json; charset=utf-8", chatBody, `"chat.completion"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := do(t, "POST", tt.path, []byte(tt.body), append(hdr, "Content-Type", tt.ct)...)
			if resp.StatusCode != 200 || !strings.Contains(string(raw), tt.want) {
				t.Fatalf("status %d body %s", resp.StatusCode, raw)
			}
			if got := up.last().Header.Get("Content-Type"); got != "application/json" {
				t.Fatalf("upstream Content-Type %q", got)
			}
		})
	}

	t.Run("multipart keeps its own", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("model", "whisper-1")
		fw, _ := mw.CreateFormFile("file", "a.wav")
		fw.Write([]byte("RIFF....WAVE"))
		mw.Close()
		resp, raw := do(t, "POST", "/audio/transcriptions", buf.Bytes(), append(hdr, "Content-Type", mw.FormDataContentType())...)
		if resp.StatusCode != 200 || !strings.Contains(string(raw), "multipart bytes=") {
			t.Fatalf("status %d body %s", resp.StatusCode, raw)
		}
		if got := up.last().Header.Get("Content-Type"); got != mw.FormDataContentType() {
			t.Fatalf("upstream Content-Type %q, want the client's %q", got, mw.FormDataContentType())
		}
	})
}
