package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Questions and their embeddings: paraphrases of the France question lie
// above the 0.95 threshold from it, the Spain question below.
const (
	qFrance  = "What is the capital of France?"
	qPara    = "Which city is France's capital?"
	qPara2   = "What's the capital city of France?"
	qPara3   = "Tell me the capital of France."
	qSpain   = "What is the capital of Spain?"
	qStreamy = "Name the capital of France."
	qSpainP  = "Which city is Spain's capital?"
)

func semanticTable() map[string][]float32 {
	return map[string][]float32{
		"user: " + qFrance:  axis(0),
		"user: " + qPara:    near(0.97, 1),
		"user: " + qPara2:   near(0.98, 2),
		"user: " + qPara3:   near(0.99, 3),
		"user: " + qSpain:   near(0.90, 4),
		"user: " + qStreamy: near(0.985, 5),
		// 0.97 from the Spain question, 0.87 from the France one.
		"user: " + qSpainP: lean(near(0.90, 4), 0.97, 6),
	}
}

// TestSemanticCache drives the semantic cache end to end: a real embedding
// call through the gateway to a virtual key, the index, the partitions,
// force refresh, expiry and an embedding outage.
func TestSemanticCache(t *testing.T) {
	clk := useTestClock(t)
	emb := newFakeEmbeddings(t, semanticTable())
	up := newEchoChat(t)
	loadFresh(t, site{LLM: semanticLLM(emb, "max_entries 100"), Gateway: "custom_host_allow loopback\ncache_size 21MB"})
	cfg := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"semantic","max_age":60}`))
	const mini, big = "gpt-4o-mini", "gpt-4o"
	france := "re: " + qFrance + " [1]"
	steps := []struct {
		name     string
		model    string
		question string
		headers  []string
		status   string
		answer   string // "" means the provider's fresh answer
		upstream int    // provider calls so far
		embeds   int    // embedding calls so far
	}{
		{"first request misses", mini, qFrance, nil, "SEMANTIC MISS", "", 1, 1},
		{"the same request is an exact hit", mini, qFrance, nil, "HIT", france, 1, 1},
		{"a paraphrase above the threshold hits", mini, qPara, nil, "SEMANTIC HIT", france, 1, 2},
		{"the paraphrase is then an exact hit", mini, qPara, nil, "HIT", france, 1, 2},
		{"a question below the threshold misses", mini, qSpain, nil, "SEMANTIC MISS", "", 2, 3},
		{"another workspace never hits", mini, qPara2, []string{"x-gateway-api-key", "other-gateway-key-0123456789"}, "SEMANTIC MISS", "", 3, 4},
		{"another namespace never hits", mini, qPara2, []string{"x-gateway-cache-namespace", "team-b"}, "SEMANTIC MISS", "", 4, 5},
		{"another model never hits", big, qPara2, nil, "SEMANTIC MISS", "", 5, 6},
		{"the same paraphrase hits in the first partition", mini, qPara2, nil, "SEMANTIC HIT", france, 5, 7},
		{"force refresh skips both lookups", mini, qFrance, []string{"x-gateway-cache-force-refresh", "true"}, "REFRESH", "re: " + qFrance + " [6]", 6, 8},
		{"the refreshed answer is served", mini, qFrance, nil, "HIT", "re: " + qFrance + " [6]", 6, 8},
		{"outage:on", "", "", nil, "", "", 0, 0},
		{"an embedding outage is a miss", mini, qPara3, nil, "SEMANTIC MISS", "", 7, 9},
		{"outage:off", "", "", nil, "", "", 0, 0},
		{"the outage's answer was stored exactly", mini, qPara3, nil, "HIT", "re: " + qPara3 + " [7]", 7, 9},
		{"advance:61s", "", "", nil, "", "", 0, 0},
		{"an expired answer is not served by similarity", mini, qPara, nil, "SEMANTIC MISS", "", 8, 10},
	}
	for _, st := range steps {
		switch {
		case strings.HasPrefix(st.name, "advance:"):
			d, _ := time.ParseDuration(strings.TrimPrefix(st.name, "advance:"))
			clk.advance(d)
			continue
		case strings.HasPrefix(st.name, "outage:"):
			emb.setDown(st.name == "outage:on")
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			resp, raw := do(t, "POST", "/chat/completions", askBody(st.model, st.question), append([]string{"x-gateway-config", cfg}, st.headers...)...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			wantHeaders(t, resp, "x-gateway-cache-status", st.status)
			want := st.answer
			if want == "" {
				want = "re: " + st.question + " [" + itoa(up.count()) + "]"
			}
			if got := answerOf(t, raw); got != want {
				t.Errorf("answer %q, want %q", got, want)
			}
			if up.count() != st.upstream || emb.calls() != st.embeds {
				t.Fatalf("%d provider calls and %d embedding calls, want %d and %d", up.count(), emb.calls(), st.upstream, st.embeds)
			}
		})
	}

	// The embedding calls carried the embedded turns, and the outage was
	// logged as a miss without the embedding key.
	if emb.inputs[0] != "user: "+qFrance {
		t.Errorf("embedded %q", emb.inputs[0])
	}
	log := readLog(t)
	if !strings.Contains(log, "embedding failed, serving as a cache miss") {
		t.Error("the embedding outage was not logged")
	}
	if strings.Contains(log, embedKey) {
		t.Error("the embedding credential reached the log")
	}
}

// TestSemanticCacheStream: a streamed request whose paraphrase was stored
// from a plain request is served from the semantic cache as a well-formed
// stream the SDK reads, usage included.
func TestSemanticCacheStream(t *testing.T) {
	emb := newFakeEmbeddings(t, semanticTable())
	up := newEchoChat(t)
	loadFresh(t, site{LLM: semanticLLM(emb, ""), Gateway: "custom_host_allow loopback\ncache_size 21MB"})
	cfg := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"semantic"}`))
	client := newClient("x-gateway-config", cfg)
	ask := func(q string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:    "gpt-4o-mini",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Answer in one word."), openai.UserMessage(q)},
		}
	}
	if _, err := client.Chat.Completions.New(context.Background(), ask(qFrance)); err != nil {
		t.Fatal(err)
	}
	params := ask(qStreamy)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var httpResp *http.Response
	stream := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithResponseInto(&httpResp))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	wantHeaders(t, httpResp, "x-gateway-cache-status", "SEMANTIC HIT", "content-type", "text/event-stream")
	if up.count() != 1 {
		t.Fatalf("the stream went upstream (%d calls)", up.count())
	}
	if got := acc.Choices[0].Message.Content; got != "re: "+qFrance+" [1]" || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 12 {
		t.Fatalf("stream from the semantic cache: %q %q usage %+v", got, acc.Choices[0].FinishReason, acc.Usage)
	}

	// And the other way round: a streamed answer, assembled and indexed,
	// answers a plain paraphrase.
	stream = client.Chat.Completions.NewStreaming(context.Background(), ask(qSpain), option.WithResponseInto(&httpResp))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	wantHeaders(t, httpResp, "x-gateway-cache-status", "SEMANTIC MISS")
	resp, err := client.Chat.Completions.New(context.Background(), ask(qSpainP), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders(t, httpResp, "x-gateway-cache-status", "SEMANTIC HIT")
	if resp.Choices[0].Message.Content != "re: "+qSpain+" [2]" || up.count() != 2 {
		t.Fatalf("assembled answer %q after %d calls", resp.Choices[0].Message.Content, up.count())
	}
}
