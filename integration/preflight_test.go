package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

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
		Error struct{ Code, Type, Message string }
	}
	_ = json.Unmarshal(raw, &e)
	if r.StatusCode != http.StatusBadRequest || e.Error.Code != "context_length_exceeded" || r.Header.Get("x-gateway-error-type") != "context_length_exceeded" ||
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
