package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"

	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/all"
)

// Which targets take a Messages call as sent: by provider and by the
// model each target is sent (override_params may name another).
func TestMessagesNative(t *testing.T) {
	r, err := messages.Parse([]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	target := func(provider, model string) *routing.Target {
		t := &routing.Target{Settings: providers.Settings{Provider: provider}}
		if model != "" {
			t.OverrideParams = map[string]json.RawMessage{"model": json.RawMessage(`"` + model + `"`)}
		}
		return t
	}
	cases := []struct {
		name   string
		op     providers.Operation
		target *routing.Target
		native bool
	}{
		{"anthropic", providers.OpMessages, target("anthropic", ""), true},
		{"anthropic counts", providers.OpCountTokens, target("anthropic", ""), true},
		{"openai", providers.OpMessages, target("openai", ""), false},
		{"groq", providers.OpMessages, target("groq", ""), false},
		{"google", providers.OpMessages, target("google", ""), false},
		{"bedrock, Claude by override", providers.OpMessages, target("bedrock", "anthropic.claude-3-haiku-20240307-v1:0"), true},
		{"bedrock, Nova by override", providers.OpMessages, target("bedrock", "amazon.nova-pro-v1:0"), false},
		{"bedrock counts Claude", providers.OpCountTokens, target("bedrock", "anthropic.claude-3-haiku-20240307-v1:0"), true},
		{"bedrock does not count Nova", providers.OpCountTokens, target("bedrock", "amazon.nova-pro-v1:0"), false},
		{"vertex counts Claude", providers.OpCountTokens, target("vertex-ai", ""), true},
		{"vertex counts Gemini (countTokens)", providers.OpCountTokens, target("vertex-ai", "gemini-2.5-pro"), true},
		{"google counts (countTokens)", providers.OpCountTokens, target("google", ""), true},
		{"vertex, the client's Claude model", providers.OpMessages, target("vertex-ai", ""), true},
		{"vertex, Gemini by override", providers.OpMessages, target("vertex-ai", "gemini-2.5-pro"), false},
		{"unknown provider", providers.OpMessages, target("nope", ""), false},
	}
	for _, c := range cases {
		a := &messagesAdapter{r: r, op: c.op}
		if got := a.Native(c.target); got != c.native {
			t.Errorf("%s: native %v, want %v", c.name, got, c.native)
		}
	}
}

// Errors on the Messages paths are written in Anthropic's shape, by the
// responder's error path, its held-answer path and its stream error.
func TestMessagesErrorShape(t *testing.T) {
	if errorShaperFor("/v1/chat/completions") != nil || errorShaperFor("/v1/messagesx") != nil {
		t.Fatal("a shaper for another path")
	}
	for _, p := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		if errorShaperFor(p) == nil {
			t.Fatalf("no shaper for %s", p)
		}
	}
	w := httptest.NewRecorder()
	o := responder{w: w, shape: errorShaperFor("/v1/messages")}
	o.error(apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "invalid gateway API key"), nil)
	if w.Code != 401 || w.Body.String() != `{"type":"error","error":{"type":"authentication_error","message":"invalid gateway API key"}}` ||
		w.Header().Get("Content-Type") != "application/json" || w.Header().Get(apierror.HeaderGatewayError) != "true" {
		t.Fatalf("%d %s %v", w.Code, w.Body, w.Header())
	}
	w = httptest.NewRecorder()
	o = responder{w: w, shape: errorShaperFor("/v1/messages")}
	o.held(&heldAnswer{status: 429, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(`{"error":{"message":"slow down","type":"requests"}}`)}, nil, false)
	if w.Code != 429 || w.Body.String() != `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	o = responder{w: w, shape: errorShaperFor("/v1/messages")}
	o.streamError(apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "cut"))
	if w.Body.String() != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"cut\"}}\n\n" {
		t.Fatalf("%q", w.Body)
	}
}

// TestStreamStoredWhenEndMarkerIsSplit: a stream is stored for the cache
// even when a provider read cut its end marker (Anthropic's event:
// message_stop, or a chat stream's data: [DONE]) across two writes, at
// any byte, and when it arrives a byte at a time.
func TestStreamStoredWhenEndMarkerIsSplit(t *testing.T) {
	streams := map[string]string{
		"messages": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[]}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"chat": "data: {\"object\":\"chat.completion.chunk\"}\n\ndata: [DONE]\n\n",
	}
	markers := map[string]string{"messages": string(messageStopEvent), "chat": string(sseDoneEvent)}
	for name, stream := range streams {
		m := strings.Index(stream, markers[name])
		var cuts [][]int
		for at := m - 1; at <= m+len(markers[name])+1; at++ {
			cuts = append(cuts, []int{at})
		}
		var bytewise []int
		for at := 1; at < len(stream); at++ {
			bytewise = append(bytewise, at)
		}
		cuts = append(cuts, bytewise)
		for _, cut := range cuts {
			rec := httptest.NewRecorder()
			stored := 0
			c := &capture{client: rec, store: func(body []byte, stream bool) {
				stored++
				if !stream || !strings.Contains(string(body), markers[name]) {
					t.Errorf("%s: stored %q", name, body)
				}
			}}
			c.startTee(1 << 20)
			fw := flushWriter{w: rec, tee: c}
			prev := 0
			for _, at := range append(cut, len(stream)) {
				_, _ = fw.Write([]byte(stream[prev:at]))
				prev = at
			}
			if stored != 1 || rec.Body.String() != stream {
				t.Fatalf("%s cut at %v: stored %d times", name, cut[:min(len(cut), 3)], stored)
			}
		}
	}
}
