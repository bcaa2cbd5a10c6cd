package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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
		option.WithRequestTimeout(20 * time.Second),
	}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, option.WithHeader(headers[i], headers[i+1]))
	}
	return openai.NewClient(opts...)
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
}

func TestOpenAIChat(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "x-gateway-trace-id", "trace-abc")
	var httpResp *http.Response
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"x-gateway-trace-id": "trace-abc", "x-gateway-provider": "openai", "x-gateway-last-used-option-index": "config", "x-gateway-retry-attempt-count": "0"} {
		if got := httpResp.Header.Get(k); got != want {
			t.Errorf("response header %s = %q, want %q", k, got, want)
		}
	}
	if got := resp.Choices[0].Message.Content; got != "Hello!" {
		t.Fatalf("content = %q", got)
	}
	if resp.Usage.TotalTokens != 12 {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	seen := up.last()
	if seen.Path != "/v1/chat/completions" || seen.Header.Get("Authorization") != "Bearer sk-test-provider" {
		t.Fatalf("upstream saw %s auth=%q", seen.Path, seen.Header.Get("Authorization"))
	}
	for k := range seen.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-gateway-") || strings.HasPrefix(lk, "x-forwarded-") {
			t.Fatalf("header %s leaked upstream", k)
		}
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(logLineFor(t, "trace-abc")), &entry); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"trace_id": "trace-abc", "api_key_name": "test", "provider": "openai", "model": "gpt-4o-mini", "endpoint": "chat.completions", "status": float64(200), "stream": false} {
		if entry[k] != want {
			t.Errorf("log %s = %v, want %v", k, entry[k], want)
		}
	}
	if u, _ := entry["usage"].(map[string]any); u["total_tokens"] != float64(12) {
		t.Errorf("log usage = %v", entry["usage"])
	}
	for _, secret := range []string{gatewayKey, "sk-test-provider"} {
		if strings.Contains(readLog(t), secret) {
			t.Fatalf("secret %q reached the log", secret)
		}
	}
}
