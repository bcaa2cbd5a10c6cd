package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

func cohereClient(up *fakeServer) openai.Client {
	return translatedClient("x-gateway-provider", "cohere", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+cohereKey)
}

func TestCohereChat(t *testing.T) {
	up := fakeCohere(t, fixture(t, "cohere", "response_tools.json"), nil)
	loadProviderSite(t)
	client := cohereClient(up)
	params := toolTurnParams("command-a-03-2025")
	params.Messages = params.Messages[:2] // system + user with an image
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	resp, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	if m.Content != "I will search for the weather in Toronto." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"location":"Toronto"}` ||
		resp.Choices[0].FinishReason != "tool_calls" || resp.Usage.PromptTokens != 37 || resp.Usage.CompletionTokens != 28 {
		t.Fatalf("resp %s", resp.RawJSON())
	}
	seen := up.last()
	b := gjson.ParseBytes(seen.Body)
	if seen.Path != "/v2/chat" || b.Get("tool_choice").String() != "REQUIRED" || b.Get("max_tokens").Int() != 256 ||
		b.Get("messages.1.content.1.type").String() != "image_url" || b.Get("tools.0.function.name").String() != "get_weather" {
		t.Fatalf("upstream %s %s", seen.Path, seen.Body)
	}
}

func TestCohereStream(t *testing.T) {
	up := fakeCohere(t, nil, fixture(t, "cohere", "stream_tools.sse"))
	loadProviderSite(t)
	client := cohereClient(up)
	params := toolTurnParams("command-a-03-2025")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	acc, last := streamAll(t, &client, params)
	m := acc.Choices[0].Message
	if m.Content != "I will look up the weather." || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "get_weather_nsz5zm3w56q3" ||
		m.ToolCalls[0].Function.Arguments != "{\n    \"location\": \"Toronto\"\n}" || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("accumulated %+v", acc.Choices[0])
	}
	if len(last.Choices) != 0 || last.Usage.TotalTokens != 65 {
		t.Fatalf("last chunk %s", last.RawJSON())
	}
	// The tool turn reached Cohere in its own shape.
	b := gjson.ParseBytes(up.last().Body)
	if b.Get("messages.2.tool_calls.0.id").String() != "call_0" || b.Get("messages.3.role").String() != "tool" || b.Get("messages.3.tool_call_id").String() != "call_0" {
		t.Fatalf("upstream %s", up.last().Body)
	}
}

func TestCohereEmbeddingsAndErrors(t *testing.T) {
	up := fakeCohere(t, fixture(t, "cohere", "response_text.json"), nil)
	loadProviderSite(t)
	client := cohereClient(up)
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "embed-v4.0",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "goodbye"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Data[1].Embedding[0] != -0.5 || resp.Usage.PromptTokens != 2 {
		t.Fatalf("resp %s", resp.RawJSON())
	}
	b := gjson.ParseBytes(up.last().Body)
	if up.last().Path != "/v2/embed" || b.Get("input_type").String() != "search_document" || b.Get("embedding_types.0").String() != "float" {
		t.Fatalf("upstream %s", up.last().Body)
	}
	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "command-a-03-2025",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithHeader("Authorization", "Bearer wrong"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Message != "invalid api token" || apiErr.Type != "authentication_error" {
		t.Fatalf("err = %v", err)
	}
	chat, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "command-a-03-2025",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || !strings.HasPrefix(chat.Choices[0].Message.Content, "LLMs are") || chat.Usage.TotalTokens != 15 {
		t.Fatalf("chat %v %s", err, chat.RawJSON())
	}
}
