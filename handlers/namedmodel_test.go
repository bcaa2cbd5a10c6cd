package handlers

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// form builds a multipart/form-data body of fields (name, value pairs)
// and a file part, with its Content-Type.
func form(t *testing.T, fields ...string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	fw, err := w.CreateFormFile("file", "a.wav")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte("RIFF....WAVE"))
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	w.Close()
	return b.Bytes(), w.FormDataContentType()
}

// TestCheckModelEveryNamedModel: a key allowed only gpt-4o* is refused a
// model named in a multipart field, a passed-through JSON body or a
// provider-native path, as it is one named in a chat body; a body naming
// its model twice or unreadably is refused whatever the models.
func TestCheckModelEveryNamedModel(t *testing.T) {
	id := &identity.Caller{AllowedModels: []string{"gpt-4o*"}}
	whisper, whisperCT := form(t, "model", "whisper-1")
	allowed, allowedCT := form(t, "model", "gpt-4o-transcribe")
	twice, twiceCT := form(t, "model", "gpt-4o-transcribe", "model", "whisper-1")
	none, noneCT := form(t, "language", "en")
	long, longCT := form(t, "model", strings.Repeat("m", maxModelField+1))
	for _, tc := range []struct {
		name, method, path, ct string
		body                   []byte
		want                   int // 0: allowed
		code                   string
	}{
		{"transcription denied", "POST", "/audio/transcriptions", whisperCT, whisper, 403, "model_not_allowed"},
		{"transcription allowed", "POST", "/audio/transcriptions", allowedCT, allowed, 0, ""},
		{"translation denied", "POST", "/audio/translations", whisperCT, whisper, 403, "model_not_allowed"},
		{"image edit denied", "POST", "/images/edits", whisperCT, whisper, 403, "model_not_allowed"},
		{"model field twice", "POST", "/audio/transcriptions", twiceCT, twice, 400, ""},
		{"no model field", "POST", "/audio/transcriptions", noneCT, none, 0, ""},
		{"model field too long", "POST", "/audio/transcriptions", longCT, long, 400, ""},
		{"multipart without boundary", "POST", "/audio/transcriptions", "multipart/form-data", whisper, 400, ""},
		{"multipart cut short", "POST", "/audio/transcriptions", whisperCT, whisper[:len(whisper)/2], 400, ""},
		{"passthrough JSON denied", "POST", "/moderations", "application/json", []byte(`{"model":"omni-moderation-latest","input":"x"}`), 403, "model_not_allowed"},
		{"passthrough JSON escaped name", "POST", "/fine_tuning/jobs", "application/json", []byte(`{"mod\u0065l":"o3","training_file":"f"}`), 403, "model_not_allowed"},
		{"passthrough JSON allowed", "POST", "/fine_tuning/jobs", "application/json", []byte(`{"model":"gpt-4o-mini","training_file":"f"}`), 0, ""},
		{"passthrough JSON model not a string", "POST", "/moderations", "application/json", []byte(`{"model":7}`), 400, ""},
		{"passthrough no model", "GET", "/vector_stores", "", nil, 0, ""},
		{"gemini native path denied", "POST", "/models/gemini-2.5-pro:generateContent", "application/json", []byte(`{"contents":[]}`), 403, "model_not_allowed"},
		{"bedrock native path denied", "POST", "/model/anthropic.claude-3-haiku/invoke", "application/json", []byte(`{}`), 403, "model_not_allowed"},
		{"native path allowed", "POST", "/models/gpt-4o:generateContent", "application/json", []byte(`{}`), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &providers.Call{Op: providers.OperationFor(tc.method, tc.path), Method: tc.method, Path: tc.path,
				Header: http.Header{}, Body: tc.body}
			if tc.ct != "" {
				c.Header.Set("Content-Type", tc.ct)
			}
			err := checkModel(id, c)
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := apierror.As(err)
			if err == nil || e.Status != tc.want {
				t.Fatalf("got %v, want %d", err, tc.want)
			}
			if code, _ := e.Code.(string); tc.code != "" && code != tc.code {
				t.Fatalf("code %q, want %q", code, tc.code)
			}
		})
	}
	// A key without an allow-list is never asked: nothing is read.
	c := &providers.Call{Op: providers.OpTranscriptions, Method: "POST", Path: "/audio/transcriptions",
		Header: http.Header{"Content-Type": {twiceCT}}, Body: twice}
	if err := checkModel(&identity.Caller{}, c); err != nil {
		t.Fatalf("a key with no allow-list: %v", err)
	}
}
