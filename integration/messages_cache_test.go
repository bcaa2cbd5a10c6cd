package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestMessagesCacheNativeStream: a native target's Messages stream
// (Anthropic's SSE, and Bedrock's event stream turned into it) is stored
// by the simple cache as the answer it adds up to. The same stream again
// is a HIT that replays Anthropic's event sequence without calling the
// provider, and the official SDK adds it up to the same message, usage
// included; the same body without stream is a HIT with that message as
// JSON.
func TestMessagesCacheNativeStream(t *testing.T) {
	ant := messagesAnthropic(t)
	bed := newFakeBedrockClaude(t)
	loadProviderSite(t)
	ctx := context.Background()
	for _, tg := range []struct {
		name, model, config string
		calls               func() int
	}{
		{"anthropic", "claude-sonnet-4-5", anthropicTarget(ant), func() int { ant.mu.Lock(); defer ant.mu.Unlock(); return len(ant.seen) }},
		{"bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", bedrockTarget(bed), func() int { bed.mu.Lock(); defer bed.mu.Unlock(); return len(bed.seen) }},
	} {
		t.Run(tg.name, func(t *testing.T) {
			config := strings.Replace(tg.config, `{`, `{"cache":{"mode":"simple"},`, 1)
			client := messagesClient(configHeader(config)...)
			p := userText(tg.model, "Hello "+t.Name())
			p.Tools = []anthropic.ToolUnionParam{messagesWeatherTool()}
			stream := func(want string) anthropic.Message {
				t.Helper()
				before := tg.calls()
				var raw *http.Response
				st := client.Messages.NewStreaming(ctx, p, option.WithResponseInto(&raw))
				var acc anthropic.Message
				var kinds []string
				for st.Next() {
					ev := st.Current()
					kinds = append(kinds, ev.Type)
					if err := acc.Accumulate(ev); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				called := tg.calls() - before
				if got := raw.Header.Get("X-Gateway-Cache-Status"); got != want || (want == "HIT") != (called == 0) {
					t.Fatalf("cache status %q (want %s), provider called %d times", got, want, called)
				}
				if kinds[0] != "message_start" || kinds[len(kinds)-1] != "message_stop" {
					t.Fatalf("events %v", kinds)
				}
				return acc
			}
			first := stream("MISS")
			if first.Content[0].Text == "" || first.Usage.OutputTokens != 7 || first.Usage.CacheReadInputTokens != 4 {
				t.Fatalf("first answer %s", first.RawJSON())
			}
			hit := stream("HIT")
			if !sameMessage(first, hit) {
				t.Fatalf("the replay differs:\n%s\n%s", first.RawJSON(), hit.RawJSON())
			}
			before := tg.calls()
			var raw *http.Response
			msg, err := client.Messages.New(ctx, p, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			if raw.Header.Get("X-Gateway-Cache-Status") != "HIT" || tg.calls() != before || !sameMessage(first, *msg) {
				t.Fatalf("JSON %q, provider called %d times: %s", raw.Header.Get("X-Gateway-Cache-Status"), tg.calls()-before, msg.RawJSON())
			}
		})
	}
}

// sameMessage compares what a client reads of two messages: id, model,
// content, stop reason and sequence, usage.
func sameMessage(a, b anthropic.Message) bool {
	type view struct {
		ID, Model, StopReason, StopSequence string
		Content                             []anthropic.ContentBlockUnion
		In, Out, Read, Write                int64
	}
	v := func(m anthropic.Message) string {
		j, _ := json.Marshal(view{m.ID, m.Model, string(m.StopReason), m.StopSequence, m.Content,
			m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadInputTokens, m.Usage.CacheCreationInputTokens})
		return string(j)
	}
	return v(a) == v(b)
}
