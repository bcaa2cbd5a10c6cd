package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

func geminiFixtures(t testing.TB) geminiReplies {
	return geminiReplies{
		Generate:     fixture(t, "gemini", "response_tools.json"),
		Stream:       fixture(t, "gemini", "stream_tools.sse"),
		Embed:        fixture(t, "gemini", "embed_response.json"),
		Predict:      fixture(t, "vertex", "predict_response.json"),
		Claude:       fixture(t, "anthropic", "response_tools.json"),
		ClaudeStream: fixture(t, "anthropic", "stream_tools.sse"),
	}
}

// vertexClient returns a client whose config targets vertex-ai with the
// service account, through the fake's custom host.
func vertexClient(t testing.TB, up *fakeServer, sa json.RawMessage) openai.Client {
	cfg, _ := json.Marshal(map[string]any{
		"provider": "vertex-ai", "cloudc_region": "europe-west4", "cloudc_service_account_json": sa, "custom_host": up.URL,
	})
	return translatedClient("x-gateway-config", string(cfg))
}

func TestVertexServiceAccountChat(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	sa, tokens := newServiceAccount(t, "sa-project")
	loadProviderSite(t)
	client := vertexClient(t, up, sa)
	for i := 0; i < 2; i++ {
		resp, err := client.Chat.Completions.New(context.Background(), toolTurnParams("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Choices[0].Message
		if m.Content != "Checking both." || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "call_0" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` {
			t.Fatalf("message %+v", m)
		}
		if resp.Choices[0].FinishReason != "tool_calls" || resp.Usage.CompletionTokensDetails.ReasoningTokens != 50 || resp.Usage.PromptTokensDetails.CachedTokens != 64 {
			t.Fatalf("finish %s usage %+v", resp.Choices[0].FinishReason, resp.Usage)
		}
	}
	if n := tokens.issued.Load(); n != 1 {
		t.Fatalf("token endpoint called %d times for two requests, want 1", n)
	}
	seen := up.last()
	if seen.Path != "/v1/projects/sa-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent" {
		t.Fatalf("path %s", seen.Path)
	}
	b := gjson.ParseBytes(seen.Body)
	checks := map[string]string{
		"systemInstruction.parts.0.text":                 "You are a weather assistant.",
		"contents.0.parts.1.inlineData.mimeType":         "image/png",
		"contents.1.role":                                "model",
		"contents.1.parts.0.functionCall.args.city":      "Paris",
		"contents.2.parts.0.functionResponse.name":       "get_weather",
		"contents.2.parts.0.functionResponse.response":   `{"output":"18C"}`,
		"tools.0.functionDeclarations.0.parameters.type": "object",
		"generationConfig.maxOutputTokens":               "256",
	}
	for path, want := range checks {
		if got := b.Get(path).String(); got != want {
			t.Errorf("upstream %s = %q, want %q", path, got, want)
		}
	}
}

func TestVertexStream(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	sa, tokens := newServiceAccount(t, "sa-project")
	loadProviderSite(t)
	client := vertexClient(t, up, sa)
	params := toolTurnParams("google/gemini-2.5-flash")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	acc, last := streamAll(t, &client, params)
	m := acc.Choices[0].Message
	if m.Content != "Let me check the weather.\n" || len(m.ToolCalls) != 2 || m.ToolCalls[1].Function.Arguments != `{"city": "Tokyo","unit": "c"}` || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("accumulated %+v", acc.Choices[0])
	}
	if len(last.Choices) != 0 || last.Usage.TotalTokens != 47 || last.Usage.CompletionTokensDetails.ReasoningTokens != 10 {
		t.Fatalf("last chunk %s", last.RawJSON())
	}
	if seen := up.last(); seen.Query != "alt=sse" || !strings.HasSuffix(seen.Path, "/models/gemini-2.5-flash:streamGenerateContent") || tokens.issued.Load() != 1 {
		t.Fatalf("upstream %s?%s", seen.Path, seen.Query)
	}
}

// streamAll runs a streaming call and assembles it with the SDK's
// accumulator, returning it and the last chunk.
func streamAll(t testing.TB, client *openai.Client, params openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, openai.ChatCompletionChunk) {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	var last openai.ChatCompletionChunk
	for stream.Next() {
		last = stream.Current()
		if !acc.AddChunk(last) {
			t.Fatalf("accumulator rejected %s", last.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return acc, last
}

func TestVertexClaude(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	sa, _ := newServiceAccount(t, "sa-project")
	loadProviderSite(t)
	client := vertexClient(t, up, sa)
	resp, err := client.Chat.Completions.New(context.Background(), toolTurnParams("claude-sonnet-4-5@20250929"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices[0].Message.ToolCalls) != 2 || resp.Usage.PromptTokens != 1320 {
		t.Fatalf("resp %s", resp.RawJSON())
	}
	seen := up.last()
	if !strings.HasSuffix(seen.Path, "/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict") ||
		gjson.GetBytes(seen.Body, "anthropic_version").String() != "vertex-2023-10-16" || gjson.GetBytes(seen.Body, "model").Exists() {
		t.Fatalf("upstream %s %s", seen.Path, seen.Body)
	}
	params := toolTurnParams("anthropic/claude-sonnet-4-5@20250929")
	acc, _ := streamAll(t, &client, params)
	if len(acc.Choices[0].Message.ToolCalls) != 2 || !strings.HasSuffix(up.last().Path, ":streamRawPredict") {
		t.Fatalf("stream %+v via %s", acc.Choices[0].Message, up.last().Path)
	}
}

func TestVertexEmbeddings(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	sa, _ := newServiceAccount(t, "sa-project")
	loadProviderSite(t)
	client := vertexClient(t, up, sa)
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-005",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"What is life?", "Nothing much"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Data[1].Embedding[0] != -0.5 || resp.Usage.PromptTokens != 6 {
		t.Fatalf("resp %s", resp.RawJSON())
	}
	if seen := up.last(); !strings.HasSuffix(seen.Path, "/models/text-embedding-005:predict") || gjson.GetBytes(seen.Body, "instances.1.content").String() != "Nothing much" {
		t.Fatalf("upstream %s %s", seen.Path, seen.Body)
	}
}

func TestVertexAccessTokenAndErrors(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	loadProviderSite(t)
	// An access token as api_key, project and region from headers.
	client := translatedClient("x-gateway-provider", "vertex-ai", "x-gateway-custom-host", up.URL,
		"x-gateway-cloudc-project-id", "hdr-project", "Authorization", "Bearer "+vertexToken)
	resp, err := client.Chat.Completions.New(context.Background(), toolTurnParams("gemini-2.5-flash"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Checking both." || !strings.HasPrefix(up.last().Path, "/v1/projects/hdr-project/locations/us-central1/") {
		t.Fatalf("%s via %s", resp.RawJSON(), up.last().Path)
	}
	_, err = client.Chat.Completions.New(context.Background(), toolTurnParams("overloaded"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Message != "Resource exhausted. Please try again later." || apiErr.Code != "RESOURCE_EXHAUSTED" {
		t.Fatalf("err = %v", err)
	}
	// token_uri is honoured under the egress policy: see
	// TestEgressVertexTokenURI.
}

func googleClient(up *fakeServer) openai.Client {
	return translatedClient("x-gateway-provider", "google", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+googleKey)
}

func TestGoogleChat(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	loadProviderSite(t)
	client := googleClient(up)
	resp, err := client.Chat.Completions.New(context.Background(), toolTurnParams("gemini-2.5-flash"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices[0].Message.ToolCalls) != 2 || resp.Usage.TotalTokens != 200 ||
		!strings.Contains(resp.Choices[0].Message.RawJSON(), `"thought_signature":"CiQBVKhc7mYsTmFu"`) {
		t.Fatalf("resp %s", resp.RawJSON())
	}
	seen := up.last()
	if seen.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || seen.Query != "" || seen.Header.Get("x-goog-api-key") != googleKey || seen.Header.Get("Authorization") != "" {
		t.Fatalf("upstream %s?%s %v", seen.Path, seen.Query, seen.Header)
	}
}

func TestGoogleStream(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	loadProviderSite(t)
	client := googleClient(up)
	acc, last := streamAll(t, &client, toolTurnParams("models/gemini-2.5-flash"))
	if len(acc.Choices[0].Message.ToolCalls) != 2 || acc.Choices[0].Message.ToolCalls[0].ID != "call_0" {
		t.Fatalf("accumulated %+v", acc.Choices[0].Message)
	}
	if len(last.Choices) == 0 {
		t.Fatalf("usage chunk sent without include_usage: %s", last.RawJSON())
	}
	if seen := up.last(); seen.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || seen.Query != "alt=sse" {
		t.Fatalf("upstream %s?%s", seen.Path, seen.Query)
	}
}

func TestGoogleEmbeddingsAndErrors(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	loadProviderSite(t)
	client := googleClient(up)
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-004",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello world", "bonjour"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Data[1].Embedding[1] != -0.25 {
		t.Fatalf("resp %s", resp.RawJSON())
	}
	if seen := up.last(); seen.Path != "/v1beta/models/text-embedding-004:batchEmbedContents" || gjson.GetBytes(seen.Body, "requests.1.model").String() != "models/text-embedding-004" {
		t.Fatalf("upstream %s %s", seen.Path, seen.Body)
	}
	wrong := translatedClient("x-gateway-provider", "google", "x-gateway-custom-host", up.URL, "Authorization", "Bearer nope")
	_, err = wrong.Chat.Completions.New(context.Background(), toolTurnParams("gemini-2.5-flash"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "API key not valid. Please pass a valid API key." || apiErr.Code != "INVALID_ARGUMENT" {
		t.Fatalf("err = %v", err)
	}
}
