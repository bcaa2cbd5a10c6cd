package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// newClient returns the official OpenAI SDK pointed at the gateway, with
// the gateway key and the given extra headers (name, value pairs).
func newClient(headers ...string) openai.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(gatewayURL() + "/"),
		option.WithAPIKey("sk-test-provider"),
		option.WithHeader("x-gateway-api-key", gatewayKey),
		option.WithMaxRetries(0),
	}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, option.WithHeader(headers[i], headers[i+1]))
	}
	return openai.NewClient(opts...)
}

func TestOpenAIChat(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello!" {
		t.Fatalf("content = %q", got)
	}
	seen := up.last()
	if seen.Path != "/v1/chat/completions" || seen.Header.Get("Authorization") != "Bearer sk-test-provider" {
		t.Fatalf("upstream saw %s auth=%q", seen.Path, seen.Header.Get("Authorization"))
	}
	for k := range seen.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-gateway-") {
			t.Fatalf("gateway header %s leaked upstream", k)
		}
	}
}
