package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
)

// longText returns English text of about tokens o200k_base tokens.
func longText(t testing.TB, tokens int64) string {
	t.Helper()
	const sentence = "The committee reviewed the quarterly figures and asked for a revised forecast by Friday. "
	// Sentences merge a little at their joins: measure a run of them.
	run := strings.Repeat(sentence, 100)
	reps := int(tokens * 100 / tokenest.CountString(run, tokenest.O200k))
	s := strings.Repeat(sentence, reps)
	if n := tokenest.CountString(s, tokenest.O200k); n < tokens*99/100 || n > tokens*101/100 {
		t.Fatalf("long text is %d tokens, want about %d", n, tokens)
	}
	return s
}

// userTurn is a chat completion of one user turn.
func userTurn(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
}

// TestTokenPreflight: a 150k-token prompt to a fallback or a loadbalance
// over a gpt-4o target (a 128k window in the built-in catalog) and an o3
// target (200k) goes straight to o3: the gpt-4o upstream is never called,
// on the chat, completions, Responses and Messages roads. A short prompt
// still goes to gpt-4o; a prompt no target fits is a 400
// context_length_exceeded with no upstream call.
func TestTokenPreflight(t *testing.T) {
	small, big := newFakeOpenAI(t), newFakeOpenAI(t)
	loadFresh(t, site{})
	long := longText(t, 150000)
	fallback := `{"strategy":{"mode":"fallback","on_status_codes":[500]},"targets":[` +
		target(small, `"override_params":{"model":"gpt-4o"}`) + `,` + target(big, `"override_params":{"model":"o3"}`) + `]}`
	balance := strings.Replace(fallback, `"mode":"fallback","on_status_codes":[500]`, `"mode":"loadbalance"`, 1)
	ctx := context.Background()

	client := newClient("x-gateway-config", compactJSON(t, fallback))
	resp, err := client.Chat.Completions.New(ctx, userTurn(long))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content == "" || small.count() != 0 || big.count() != 1 {
		t.Fatalf("chat: gpt-4o saw %d requests, o3 %d; want 0 and 1", small.count(), big.count())
	}
	if got := lastAttempts(t); got != "config.targets[0]:context_window_exceeded:0 config.targets[1]:ok:200" {
		t.Fatalf("attempts %q", got)
	}

	// Loadbalance: ten long prompts, every one to o3.
	lb := newClient("x-gateway-config", compactJSON(t, balance))
	for range 10 {
		if _, err := lb.Chat.Completions.New(ctx, userTurn(long)); err != nil {
			t.Fatal(err)
		}
	}
	if small.count() != 0 || big.count() != 11 {
		t.Fatalf("loadbalance: gpt-4o saw %d requests, o3 %d; want 0 and 11", small.count(), big.count())
	}

	// The other roads, each planned the same way.
	str, _ := json.Marshal(long)
	for _, road := range []struct{ path, body string }{
		{"/completions", `{"model":"gpt-4o","prompt":` + string(str) + `}`},
		{"/responses", `{"model":"gpt-4o","input":` + string(str) + `}`},
		{"/messages", `{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":` + string(str) + `}]}`},
	} {
		before := big.count()
		r, raw := do(t, "POST", road.path, []byte(road.body), "x-gateway-config", compactJSON(t, fallback))
		if small.count() != 0 || big.count() != before+1 {
			t.Fatalf("%s: status %d, gpt-4o saw %d requests, o3 %d new: %.300s", road.path, r.StatusCode, small.count(), big.count()-before, raw)
		}
	}

	// A short prompt fits gpt-4o and goes there.
	if _, err := client.Chat.Completions.New(ctx, userTurn("hi")); err != nil {
		t.Fatal(err)
	}
	if small.count() != 1 {
		t.Fatalf("a short prompt: gpt-4o saw %d requests, want 1", small.count())
	}

	// No target fits: gpt-4o (128k) and gpt-4 (8k).
	none := strings.Replace(fallback, `"model":"o3"`, `"model":"gpt-4"`, 1)
	before := big.count()
	r, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":`+string(str)+`}]}`),
		"x-gateway-config", compactJSON(t, none))
	var e struct {
		Error struct {
			Code, Type, Message string
			ErrorType           string `json:"error_type"`
		}
	}
	_ = json.Unmarshal(raw, &e)
	if r.StatusCode != http.StatusBadRequest || e.Error.Code != "context_length_exceeded" || r.Header.Get("x-gateway-error-type") != "context_length_exceeded" ||
		e.Error.ErrorType != "context_length_exceeded" ||
		!strings.Contains(e.Error.Message, "config.targets[1] (gpt-4: 8192)") {
		t.Fatalf("no target fits: %d %s %q", r.StatusCode, raw, r.Header.Get("x-gateway-error-type"))
	}
	if small.count() != 1 || big.count() != before {
		t.Fatalf("no target fits, yet an upstream was called")
	}
	// The same through the SDK: an error it reads as OpenAI's.
	noneClient := newClient("x-gateway-config", compactJSON(t, none))
	_, err = noneClient.Chat.Completions.New(ctx, userTurn(long))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Fatalf("SDK error %v", err)
	}
}

// TestCountTokensEndpoints: POST /v1/responses/input_tokens and POST
// /v1/messages/count_tokens through the official SDKs. OpenAI's
// input_tokens is passed through to an OpenAI target; for any other
// target the gateway counts with OpenAI's tokenizer and says it
// estimated. A key restricted to other models is refused on both, with
// no upstream call.
func TestCountTokensEndpoints(t *testing.T) {
	oai, ant := newFakeOpenAI(t), messagesAnthropic(t)
	oai.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.URL.Path != "/v1/responses/input_tokens" {
			return false
		}
		writeJSON(w, 200, []byte(`{"object":"response.input_tokens","input_tokens":42}`))
		return true
	}
	s := newKeysSite(t, "")
	s.load(t)
	ctx := context.Background()
	const text, instructions = "tiktoken is great!", "You are terse."
	params := responses.InputTokenCountParams{
		Model:        openai.String("claude-sonnet-4-5"),
		Instructions: openai.String(instructions),
		Input:        responses.InputTokenCountParamsInputUnion{OfString: openai.String(text)},
	}
	want := tokenest.CountString(text, tokenest.O200k) + tokenest.CountString(instructions, tokenest.O200k)

	// Anthropic has no input_tokens: the gateway counts.
	var raw *http.Response
	antCount := newClient("x-gateway-config", anthropicTarget(ant))
	before := ant.seenCount()
	n, err := antCount.Responses.InputTokens.Count(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != want || n.Object != "response.input_tokens" || raw.Header.Get("X-Gateway-Token-Estimate") != "true" || ant.seenCount() != before {
		t.Fatalf("local count %+v (want %d), estimate %q, anthropic called %d times", n, want, raw.Header.Get("X-Gateway-Token-Estimate"), ant.seenCount()-before)
	}
	// OpenAI's own endpoint, passed through.
	oaiCount := newClient("x-gateway-config", target(oai, ""))
	n, err = oaiCount.Responses.InputTokens.Count(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 42 || raw.Header.Get("X-Gateway-Token-Estimate") != "" || oai.last().Path != "/v1/responses/input_tokens" {
		t.Fatalf("passed-through count %+v, estimate %q, path %s", n, raw.Header.Get("X-Gateway-Token-Estimate"), oai.last().Path)
	}

	// count_tokens to an OpenAI target: the tokenizer's count for
	// gpt-4o-mini, 3 + 3 per message + the role + the texts.
	mc := messagesClient(configHeader(openAITarget(oai, "gpt-4o-mini"))...)
	calls := oai.count()
	cn, err := mc.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    "gpt-4o-mini",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(instructions)},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}, aoption.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if cn.InputTokens != 3+3+1+want || raw.Header.Get("X-Gateway-Token-Estimate") != "true" || oai.count() != calls {
		t.Fatalf("count_tokens %d, want %d; estimate %q", cn.InputTokens, 3+3+1+want, raw.Header.Get("X-Gateway-Token-Estimate"))
	}

	// A key allowed only gpt-4o-mini may not count for claude.
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"count-mini","workspace_id":"`+keysWorkspace+
		`","scopes":["completions.write"],"allowed_models":["gpt-4o-mini"]}`, 200, &created)
	for _, road := range []struct{ path, body string }{
		{"/responses/input_tokens", `{"model":"claude-sonnet-4-5","input":"hi"}`},
		{"/messages/count_tokens", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`},
	} {
		before := ant.seenCount()
		r, body := do(t, "POST", road.path, []byte(road.body), "x-gateway-api-key", created.Key, "x-gateway-config", anthropicTarget(ant))
		if r.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "is not allowed for this gateway API key") || ant.seenCount() != before {
			t.Fatalf("%s with a restricted key: %d %s", road.path, r.StatusCode, body)
		}
	}
}
