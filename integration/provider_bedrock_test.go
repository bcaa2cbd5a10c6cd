package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// bedrockSite loads a Caddyfile whose virtual keys reach up: signed with
// the right secret, the wrong secret, and a Bedrock API key.
func bedrockSite(t *testing.T, up *fakeBedrock) {
	t.Helper()
	loadFresh(t, site{LLM: fmt.Sprintf(`virtual_key bedrock-test {
			provider bedrock
			clouda_access_key_id %[1]s
			clouda_secret_access_key %[2]s
			clouda_region us-west-2
			custom_host %[3]s
		}
		virtual_key bedrock-wrong-secret {
			provider bedrock
			clouda_access_key_id %[1]s
			clouda_secret_access_key not-the-secret
			custom_host %[3]s
		}
		virtual_key bedrock-apikey {
			provider bedrock
			api_key %[4]s
			custom_host %[3]s
		}`, bedrockAKID, bedrockSecret, up.URL, bedrockAPIKey)})
}

const bedrockModel = "anthropic.claude-3-5-haiku-20241022-v1:0"

func TestBedrockChat(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: bedrockModel,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage("hi"),
		},
		MaxTokens:         openai.Int(100),
		Temperature:       openai.Float(0.2),
		Seed:              openai.Int(7),   // dropped: Converse has no seed
		PresencePenalty:   openai.Float(1), // dropped
		ParallelToolCalls: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello from Bedrock!" || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("content %q finish %q", got, resp.Choices[0].FinishReason)
	}
	if u := resp.Usage; u.PromptTokens != 14 || u.CompletionTokens != 4 || u.TotalTokens != 18 || u.PromptTokensDetails.CachedTokens != 3 {
		t.Fatalf("usage %+v", u)
	}
	if resp.Model != bedrockModel || resp.Object != "chat.completion" {
		t.Fatalf("model %q object %q", resp.Model, resp.Object)
	}
	seen := up.last()
	if seen.Path != "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse" {
		t.Fatalf("path %s", seen.Path)
	}
	if !strings.Contains(seen.Header.Get("Authorization"), "/us-west-2/bedrock/aws4_request") {
		t.Fatalf("auth %q", seen.Header.Get("Authorization"))
	}
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(seen.Body, &sent); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"model", "max_tokens", "seed", "presence_penalty", "parallel_tool_calls", "temperature"} {
		if _, ok := sent[k]; ok {
			t.Errorf("OpenAI field %q reached Converse: %s", k, seen.Body)
		}
	}
	if string(sent["system"]) != `[{"text":"Be brief."}]` || string(sent["inferenceConfig"]) != `{"maxTokens":100,"temperature":0.2}` {
		t.Fatalf("converse body %s", seen.Body)
	}
	for k := range seen.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-gateway-") {
			t.Fatalf("gateway header %s leaked upstream", k)
		}
	}
}

func TestBedrockChatToolCall(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	params := bedrockToolParams("What's the weather in Paris?")
	resp, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" ||
		m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.ToolCalls[0].ID != "tooluse_1" || m.Content != "Let me check." {
		t.Fatalf("message %+v", m)
	}
	if !strings.Contains(string(up.last().Body), `"toolSpec":{"name":"get_weather"`) {
		t.Fatalf("tools not sent: %s", up.last().Body)
	}
}

func bedrockToolParams(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    bedrockModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        "get_weather",
			Description: openai.String("Current weather"),
			Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
	}
}

func TestBedrockChatARNModel(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	arn := "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0"
	if _, err := client.Chat.Completions.New(context.Background(), chatParams(arn)); err != nil {
		t.Fatal(err)
	}
	want := "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse"
	if got := up.last().Path; got != want {
		t.Fatalf("path %s\nwant %s", got, want)
	}
}

func TestBedrockStream(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	for _, includeUsage := range []bool{true, false} {
		t.Run(fmt.Sprint("include_usage=", includeUsage), func(t *testing.T) {
			truncateLog()
			params := chatParams(bedrockModel)
			if includeUsage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			traceID := fmt.Sprintf("bedrock-stream-%v", includeUsage)
			stream := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithHeader("x-gateway-trace-id", traceID))
			var acc openai.ChatCompletionAccumulator
			var chunks []openai.ChatCompletionChunk
			for stream.Next() {
				chunks = append(chunks, stream.Current())
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("accumulator rejected chunk %s", stream.Current().RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if got := acc.Choices[0].Message.Content; got != "Hello, \"wörld\"\n!" || acc.Choices[0].FinishReason != "stop" {
				t.Fatalf("content %q finish %q", got, acc.Choices[0].FinishReason)
			}
			last := chunks[len(chunks)-1]
			if includeUsage {
				if last.Usage.TotalTokens != 17 || len(last.Choices) != 0 {
					t.Fatalf("last chunk %s", last.RawJSON())
				}
			} else {
				for _, c := range chunks {
					if c.JSON.Usage.Valid() && c.Usage.TotalTokens != 0 {
						t.Fatalf("usage chunk sent though not asked for: %s", c.RawJSON())
					}
				}
			}
			if !strings.HasSuffix(up.last().Path, "/converse-stream") || up.last().Header.Get("Accept") != "application/vnd.amazon.eventstream" {
				t.Fatalf("upstream %s accept %q", up.last().Path, up.last().Header.Get("Accept"))
			}
			if line := awaitLogLine(t, traceID); !strings.Contains(line, `"total_tokens":17`) {
				t.Fatalf("log lacks the stream's usage: %s", line)
			}
		})
	}
}

// awaitLogLine returns the gateway's request log entry for traceID. The
// entry is written after the response ends, which a client that has read
// [DONE] can precede, so it is waited for (boundedly); matching on the
// trace id keeps a late entry of an earlier test from being taken for it.
func awaitLogLine(t *testing.T, traceID string) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		for _, l := range gatewayLogLines(t) {
			if strings.Contains(l, `"trace_id":"`+traceID+`"`) {
				return l
			}
		}
	}
	t.Fatalf("no log entry for trace id %s", traceID)
	return ""
}

func TestBedrockStreamToolCalls(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	stream := client.Chat.Completions.NewStreaming(context.Background(), bedrockToolParams("weather in Paris and Rome?"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator rejected chunk %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	m := acc.Choices[0].Message
	if m.Content != "Checking both cities." || acc.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 2 {
		t.Fatalf("message %+v finish %q", m, acc.Choices[0].FinishReason)
	}
	for i, want := range []struct{ id, args string }{{"tooluse_paris", `{"city": "Paris"}`}, {"tooluse_rome", `{"city": "Rome"}`}} {
		tc := m.ToolCalls[i]
		if tc.ID != want.id || tc.Function.Name != "get_weather" || tc.Function.Arguments != want.args {
			t.Fatalf("tool call %d: %+v", i, tc)
		}
	}
}

func TestBedrockStreamException(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	params := chatParams(bedrockModel)
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("please throttle")}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var content strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "Too many tokens, please wait before trying again.") {
		t.Fatalf("stream error = %v", err)
	}
	if content.String() != "Partial" {
		t.Fatalf("content before the error: %q", content.String())
	}
}

func TestBedrockEmbeddings(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	ctx := context.Background()

	resp, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "amazon.titan-embed-text-v2:0",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 1 || fmt.Sprint(resp.Data[0].Embedding) != "[0.25 -0.5 0.125]" || resp.Usage.PromptTokens != 2 {
		t.Fatalf("titan %+v", resp)
	}
	if up.last().Path != "/model/amazon.titan-embed-text-v2%3A0/invoke" || string(up.last().Body) != `{"inputText":"hello"}` {
		t.Fatalf("upstream %s %s", up.last().Path, up.last().Body)
	}

	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "amazon.titan-embed-text-v2:0",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "one text per call") {
		t.Fatalf("titan batch err = %v", err)
	}

	resp, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "cohere.embed-english-v3",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Data[1].Index != 1 || fmt.Sprint(resp.Data[1].Embedding) != "[1.5 -1]" {
		t.Fatalf("cohere %+v", resp.Data)
	}
}

func TestBedrockSignatureRejected(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-wrong-secret")
	_, err := client.Chat.Completions.New(context.Background(), chatParams(bedrockModel))
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(apiErr.Message, "signature we calculated does not match") || apiErr.Type != "authentication_error" {
		t.Fatalf("error %q type %q", apiErr.Message, apiErr.Type)
	}
	if apiErr.Response.Header.Get("x-gateway-error") != "" {
		t.Fatal("a provider error must not be marked as the gateway's")
	}
}

func TestBedrockHeadersWithSessionToken(t *testing.T) {
	up := newFakeBedrock(t)
	up.sessionToken = "FwoGZXIvYXdzEBYaDTestSessionToken"
	loadFresh(t, site{})
	client := newClient(
		"x-gateway-provider", "bedrock",
		"x-gateway-custom-host", up.URL,
		"x-gateway-clouda-access-key-id", bedrockAKID,
		"x-gateway-clouda-secret-access-key", bedrockSecret,
		"x-gateway-clouda-session-token", up.sessionToken,
		"x-gateway-clouda-region", "eu-central-1",
	)
	resp, err := client.Chat.Completions.New(context.Background(), chatParams(bedrockModel))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello from Bedrock!" {
		t.Fatalf("content %q", resp.Choices[0].Message.Content)
	}
	auth := up.last().Header.Get("Authorization")
	if !strings.Contains(auth, "/eu-central-1/bedrock/") || !strings.Contains(auth, "x-amz-security-token") {
		t.Fatalf("auth %q", auth)
	}
}

func TestBedrockConfigAndAPIKey(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	cfg := fmt.Sprintf(`{"provider":"bedrock","clouda_access_key_id":%q,"clouda_secret_access_key":%q,"custom_host":%q}`, bedrockAKID, bedrockSecret, up.URL)
	tests := []struct {
		name     string
		headers  []string
		wantAuth string // prefix
	}{
		{"config", []string{"x-gateway-config", cfg}, "AWS4-HMAC-SHA256 Credential=" + bedrockAKID + "/"},
		{"api key", []string{"x-gateway-virtual-key", "bedrock-apikey"}, "Bearer " + bedrockAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(tt.headers...)
			if _, err := client.Chat.Completions.New(context.Background(), chatParams(bedrockModel)); err != nil {
				t.Fatal(err)
			}
			if got := up.last().Header.Get("Authorization"); !strings.HasPrefix(got, tt.wantAuth) {
				t.Fatalf("auth %q, want %s…", got, tt.wantAuth)
			}
		})
	}
}

func TestBedrockErrors(t *testing.T) {
	up := newFakeBedrock(t)
	bedrockSite(t, up)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	_, err := client.Chat.Completions.New(context.Background(), chatParams("bad-model"))
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest ||
		apiErr.Message != "The provided model identifier is invalid." || apiErr.Type != "invalid_request_error" {
		t.Fatalf("err = %v", err)
	}

	// An image Bedrock would have to fetch is refused before any call.
	n := len(up.seen)
	params := chatParams(bedrockModel)
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/cat.png"}),
	})}
	_, err = client.Chat.Completions.New(context.Background(), params)
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Response.Header.Get("x-gateway-error") != "true" ||
		!strings.Contains(apiErr.Message, "cannot fetch image URLs") || apiErr.Param != "messages[0].content[0].image_url.url" {
		t.Fatalf("err = %v", err)
	}
	if len(up.seen) != n {
		t.Fatal("a rejected request reached Bedrock")
	}
}
