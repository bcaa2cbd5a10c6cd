package integration

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestKeysAllowListEveryNamedModel: a key allowed only gpt-4o* models is
// held to them where the model is not a JSON chat body's member: an audio
// transcription's multipart field (through the openai-go SDK), a
// passed-through API's JSON body and a provider-native path. The denied
// calls are 403 model_not_allowed with no provider call; the allowed one
// reaches the provider.
func TestKeysAllowListEveryNamedModel(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	s.load(t)
	var k createdKey
	as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"4o-only","scopes":["completions.write"],"allowed_models":["gpt-4o*"]}`, 200, &k)
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey("unused"),
		option.WithHeader("x-gateway-api-key", k.Key), option.WithHeader("x-gateway-virtual-key", "openai"),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	audio := bytes.Repeat([]byte("RIFF"), 1024)

	_, err := client.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		Model: "whisper-1", File: openai.File(bytes.NewReader(audio), "speech.wav", "audio/wav")})
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden || apiErr.Code != "model_not_allowed" {
		t.Fatalf("a transcription with whisper-1: %v; want 403 model_not_allowed", err)
	}
	if up.count() != 0 {
		t.Fatalf("the provider was called %d times for a denied model", up.count())
	}
	for _, c := range []struct{ path, body string }{
		{"/moderations", `{"model":"omni-moderation-latest","input":"hi"}`},
		{"/fine_tuning/jobs", `{"mod\u0065l":"o3","training_file":"file-1"}`},
		{"/models/gemini-2.5-pro:generateContent", `{"contents":[]}`},
	} {
		raw := as(t, k.Key, "POST", c.path, c.body, http.StatusForbidden, nil, "x-gateway-virtual-key", "openai")
		if errCode(t, raw) != "model_not_allowed" {
			t.Fatalf("%s: %s", c.path, raw)
		}
	}
	if up.count() != 0 {
		t.Fatalf("the provider was called %d times for denied models", up.count())
	}

	// An allowed model's transcription reaches the provider.
	if _, err := client.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		Model: "gpt-4o-transcribe", File: openai.File(bytes.NewReader(audio), "speech.wav", "audio/wav")}); err != nil {
		t.Fatalf("an allowed transcription: %v", err)
	}
	if up.count() != 1 {
		t.Fatalf("the provider saw %d calls, want 1", up.count())
	}
}
