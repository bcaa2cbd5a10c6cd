package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"
)

// fakeGeminiCount is the Gemini API's models/{model}:countTokens: the key
// in x-goog-api-key, a body {"generateContentRequest":{"model":
// "models/<model>","contents":[…],"systemInstruction":…}}, the answer
// {"totalTokens":N,…} with N = 10 per content plus 5 for a system
// instruction. Anything else gets Google's error envelope.
func fakeGeminiCount(t testing.TB) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		gen := gjson.GetBytes(body, "generateContentRequest")
		switch {
		case r.Header.Get("x-goog-api-key") != "sk-test-provider":
			writeJSON(w, 403, []byte(`{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`))
		case r.Method != http.MethodPost || r.URL.Path != "/v1beta/models/gemini-2.5-flash:countTokens":
			writeJSON(w, 404, []byte(`{"error":{"code":404,"message":"models/x is not found for API version v1beta.","status":"NOT_FOUND"}}`))
		case gen.Get("model").Str != "models/gemini-2.5-flash" || !gen.Get("contents").IsArray() || gjson.GetBytes(body, "contents").Exists():
			writeJSON(w, 400, []byte(`{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`))
		default:
			n := len(gen.Get("contents").Array()) * 10
			if gen.Get("systemInstruction").Exists() {
				n += 5
			}
			writeJSON(w, 200, []byte(fmt.Sprintf(`{"totalTokens":%d,"promptTokensDetails":[{"modality":"TEXT","tokenCount":%d}]}`, n, n)))
		}
	})
}

// TestMessagesCountTokensGemini: count_tokens through the official
// Anthropic SDK to a Gemini API target is Gemini's own count
// (models/{model}:countTokens, the Messages body translated into its
// generateContentRequest with the system instruction), and to a Gemini
// model on Vertex AI Vertex's countTokens (the same members at the top
// level), answered as
// {"input_tokens":N} with no estimate header; Gemini's refusal reaches
// the client in Anthropic's error shape.
func TestMessagesCountTokensGemini(t *testing.T) {
	up := fakeGeminiCount(t)
	loadProviderSite(t)
	ctx := context.Background()
	target := func(model string) string {
		return fmt.Sprintf(`{"provider":"google","api_key":"sk-test-provider","custom_host":%q,"override_params":{"model":%q}}`, up.URL, model)
	}
	params := anthropic.MessageCountTokensParams{
		Model:  "gemini-2.5-flash",
		System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are terse.")},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Hello")),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock("Hi.")),
			anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?")),
		},
	}
	client := messagesClient(configHeader(target("gemini-2.5-flash"))...)
	var raw *http.Response
	n, err := client.Messages.CountTokens(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 35 || raw.Header.Get("X-Gateway-Token-Estimate") != "" {
		t.Fatalf("count %d (want 35), estimate header %q", n.InputTokens, raw.Header.Get("X-Gateway-Token-Estimate"))
	}
	seen := up.last()
	if got := gjson.GetBytes(seen.Body, "generateContentRequest.systemInstruction.parts.0.text").Str; got != "You are terse." {
		t.Fatalf("gemini was sent %s", seen.Body)
	}

	// Vertex AI's countTokens for a Gemini model: the same members at the
	// top level, the access token as a bearer.
	vtx := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case r.Header.Get("Authorization") != "Bearer "+vertexToken:
			writeJSON(w, 401, []byte(`{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`))
		case r.URL.Path != "/v1/projects/msg-project/locations/us-east5/publishers/google/models/gemini-2.5-flash:countTokens" ||
			!gjson.GetBytes(body, "contents").IsArray() || gjson.GetBytes(body, "generateContentRequest").Exists():
			writeJSON(w, 400, []byte(`{"error":{"code":400,"message":"Invalid request","status":"INVALID_ARGUMENT"}}`))
		default:
			writeJSON(w, 200, []byte(fmt.Sprintf(`{"totalTokens":%d,"totalBillableCharacters":60}`, len(gjson.GetBytes(body, "contents").Array())*10+5)))
		}
	})
	vc := messagesClient(configHeader(vertexTarget(vtx))...)
	n, err = vc.Messages.CountTokens(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 35 || raw.Header.Get("X-Gateway-Token-Estimate") != "" {
		t.Fatalf("vertex: count %d (want 35), estimate header %q", n.InputTokens, raw.Header.Get("X-Gateway-Token-Estimate"))
	}

	// Gemini's refusal (an unknown model), in Anthropic's shape.
	bad := messagesClient(configHeader(target("gemini-9"))...)
	_, err = bad.Messages.CountTokens(ctx, params)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || gjson.Get(ae.RawJSON(), "type").Str != "error" || gjson.Get(ae.RawJSON(), "error.type").Str != "not_found_error" {
		t.Fatalf("refusal: %v", err)
	}
}
