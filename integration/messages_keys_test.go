package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestMessagesClaudeCodeStyle: a client that takes only a base URL and a
// key, as Claude Code does with ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY,
// reaches its key's default virtual key with the gateway key in
// x-api-key; the provider gets the virtual key's key, never the gateway
// key.
func TestMessagesClaudeCodeStyle(t *testing.T) {
	ant := messagesAnthropic(t)
	vk := fmt.Sprintf("virtual_key claude {\n\t\t\tprovider anthropic\n\t\t\tapi_key %s\n\t\t\tcustom_host %s\n\t\t}\n\t\t", anthropicKey, ant.URL)
	s := newKeysSite(t, vk)
	s.load(t)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"name":"claude-code","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"defaults":{"virtual_key":"claude"}}`, 200, &created)
	client := anthropic.NewClient(
		option.WithBaseURL(strings.TrimSuffix(gatewayURL(), "v1")),
		option.WithAPIKey(created.Key),
		option.WithMaxRetries(0),
		option.WithHTTPClient(reloadSafeClient),
	)
	msg, err := client.Messages.New(context.Background(), userText("claude-sonnet-4-5", "Hello"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "seen 1 messages" {
		t.Fatalf("answer %s", msg.RawJSON())
	}
	if got := ant.last().Header.Get("x-api-key"); got != anthropicKey {
		t.Fatalf("the provider got x-api-key %q", got)
	}
	// A wrong key is Anthropic's 401.
	bad := anthropic.NewClient(option.WithBaseURL(strings.TrimSuffix(gatewayURL(), "v1")), option.WithAPIKey("gw-"+strings.Repeat("x", 43)),
		option.WithMaxRetries(0), option.WithHTTPClient(reloadSafeClient))
	_, err = bad.Messages.New(context.Background(), userText("claude-sonnet-4-5", "Hello"))
	var apiErr *anthropic.Error
	if !asAnthropicError(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Fatalf("err %v", err)
	}
}

func asAnthropicError(err error, target **anthropic.Error) bool {
	e, ok := err.(*anthropic.Error)
	if ok {
		*target = e
	}
	return ok
}
