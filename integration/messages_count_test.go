package integration

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"
)

// vertexCountPath is Claude's token counting on Vertex AI for the project
// and region of vertexTarget: one endpoint for every model.
const vertexCountPath = "/v1/projects/msg-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"

// fakeVertexClaudeCount is Vertex AI's count-tokens:rawPredict for Claude:
// the access token as a bearer, the Messages body naming the model's id
// and Vertex's anthropic_version; the answer {"input_tokens":N} (100 per
// message plus 3). Unknown models and paths get Google's error envelope.
func fakeVertexClaudeCount(t testing.TB) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case r.Header.Get("Authorization") != "Bearer "+vertexToken:
			writeJSON(w, 401, []byte(`{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`))
		case r.Method != http.MethodPost || r.URL.Path != vertexCountPath:
			writeJSON(w, 404, []byte(`{"error":{"code":404,"message":"The requested URL was not found.","status":"NOT_FOUND"}}`))
		case !strings.HasPrefix(gjson.GetBytes(body, "model").String(), "claude-") || gjson.GetBytes(body, "anthropic_version").String() != "vertex-2023-10-16":
			writeJSON(w, 400, []byte(`{"error":{"code":400,"message":"Invalid request: `+strings.ReplaceAll(string(body), `"`, `'`)+`","status":"INVALID_ARGUMENT"}}`))
		case strings.Contains(gjson.GetBytes(body, "model").String(), "claude-2"):
			writeJSON(w, 404, []byte(`{"error":{"code":404,"message":"Publisher Model claude-2 was not found.","status":"NOT_FOUND"}}`))
		default:
			writeJSON(w, 200, []byte(fmt.Sprintf(`{"input_tokens":%d}`, len(gjson.GetBytes(body, "messages").Array())*100+3)))
		}
	})
}

// TestMessagesCountTokensCloud: count_tokens through the official SDK to
// Claude on Bedrock (CountTokens, signed, the InvokeModel body base64 in
// input.invokeModel.body) and on Vertex AI (count-tokens:rawPredict) is
// the provider's own count in Anthropic's {"input_tokens":N}, with no
// estimate header; a provider's refusal reaches the client as a 4xx in
// Anthropic's error shape, and a config that falls back from a target
// without a count to one with it reaches the one that counts.
func TestMessagesCountTokensCloud(t *testing.T) {
	bed := newFakeBedrockClaude(t)
	vtx := fakeVertexClaudeCount(t)
	up := newFakeOpenAI(t)
	loadProviderSite(t)
	ctx := context.Background()
	two := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("Hello")),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock("Hi.")),
		anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?")),
	}
	cases := []struct {
		name, model, config string
		want                int64
		check               func(t *testing.T)
	}{
		{"bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", bedrockTarget(bed), 307, func(t *testing.T) {
			seen := bed.last()
			inner, _ := base64.StdEncoding.DecodeString(gjson.GetBytes(seen.Body, "input.invokeModel.body").Str)
			if seen.Path != "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens" || gjson.GetBytes(inner, "system").Str != "You are terse." {
				t.Fatalf("bedrock was sent %s %s (%s)", seen.Path, seen.Body, inner)
			}
		}},
		{"bedrock inference profile", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", bedrockTarget(bed), 307, func(t *testing.T) {
			if p := bed.last().Path; p != "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens" {
				t.Fatalf("counted at %s", p)
			}
		}},
		{"vertex", "claude-sonnet-4-5@20250929", vertexTarget(vtx), 303, func(t *testing.T) {
			seen := vtx.last()
			if gjson.GetBytes(seen.Body, "model").Str != "claude-sonnet-4-5@20250929" || gjson.GetBytes(seen.Body, "messages.#").Int() != 3 {
				t.Fatalf("vertex was sent %s", seen.Body)
			}
		}},
		{"vertex publisher prefix", "anthropic/claude-sonnet-4-5@20250929", vertexTarget(vtx), 303, func(t *testing.T) {
			if m := gjson.GetBytes(vtx.last().Body, "model").Str; m != "claude-sonnet-4-5@20250929" {
				t.Fatalf("vertex was sent model %q", m)
			}
		}},
		{"fallback from a translated target", "anthropic.claude-sonnet-4-5-20250929-v1:0",
			`{"strategy":{"mode":"fallback","on_status_codes":[400]},"targets":[` + openAITarget(up, "gpt-4o-mini") + `,` + bedrockTarget(bed) + `]}`, 307, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := messagesClient(configHeader(tc.config)...)
			var raw *http.Response
			n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
				Model:    tc.model,
				System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are terse.")},
				Messages: two,
			}, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			if n.InputTokens != tc.want || raw.Header.Get("X-Gateway-Token-Estimate") != "" {
				t.Fatalf("count %d (want %d), estimate header %q", n.InputTokens, tc.want, raw.Header.Get("X-Gateway-Token-Estimate"))
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}

	// The provider's refusal, in Anthropic's shape.
	for _, tc := range []struct{ model, config string }{
		{"anthropic.claude-v2:1", bedrockTarget(bed)},
		{"claude-2@001", vertexTarget(vtx)},
	} {
		client := messagesClient(configHeader(tc.config)...)
		_, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: tc.model, Messages: two})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode/100 != 4 || gjson.Get(ae.RawJSON(), "type").Str != "error" || gjson.Get(ae.RawJSON(), "error.type").Str == "" {
			t.Fatalf("%s: %v", tc.model, err)
		}
	}
}
