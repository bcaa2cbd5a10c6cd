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

func TestCacheStatuses(t *testing.T) {
	clk := useTestClock(t)
	up := newScripted(t)
	loadFresh(t, site{Gateway: "custom_host_allow loopback\ncache_size 16MB"})
	simple := target(up.fakeOpenAI, `"cache":{"mode":"simple","max_age":60}`)
	steps := []struct {
		name    string
		config  string
		headers []string
		status  string
		calls   int // upstream calls so far
	}{
		{"first request misses", simple, nil, "MISS", 1},
		{"identical request hits", simple, nil, "HIT", 1},
		{"force refresh skips the lookup", simple, []string{"x-gateway-cache-force-refresh", "true"}, "REFRESH", 2},
		{"and stored the new answer", simple, nil, "HIT", 2},
		{"a namespace partitions", simple, []string{"x-gateway-cache-namespace", "team-a"}, "MISS", 3},
		{"within its namespace it hits", simple, []string{"x-gateway-cache-namespace", "team-a", "x-gateway-metadata", `{"_user":"u9"}`}, "HIT", 3},
		{"without a namespace, metadata partitions", simple, []string{"x-gateway-metadata", `{"_user":"u1"}`}, "MISS", 4},
		{"no cache configured", target(up.fakeOpenAI, ""), nil, "DISABLED", 5},
		{"semantic mode misses honestly", target(up.fakeOpenAI, `"cache":{"mode":"semantic"}`), []string{"x-gateway-cache-namespace", "sem"}, "SEMANTIC MISS", 6},
		{"and hits exactly", target(up.fakeOpenAI, `"cache":{"mode":"semantic"}`), []string{"x-gateway-cache-namespace", "sem"}, "HIT", 6},
		{"advance:61s", "", nil, "", 0},
		{"an expired answer misses", simple, nil, "MISS", 7},
	}
	var firstBody string
	for _, st := range steps {
		if d, ok := strings.CutPrefix(st.name, "advance:"); ok {
			dur, _ := time.ParseDuration(d)
			clk.advance(dur)
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			resp, raw := chat(t, st.config, st.headers...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			wantHeaders(t, resp, "x-gateway-cache-status", st.status, "x-gateway-provider", "openai",
				"x-gateway-last-used-option-index", "config", "x-gateway-retry-attempt-count", "0")
			if up.count() != st.calls {
				t.Fatalf("%d upstream calls, want %d", up.count(), st.calls)
			}
			if firstBody == "" {
				firstBody = string(raw)
			} else if st.status == "HIT" && string(raw) != firstBody {
				t.Fatalf("a hit served %s, want %s", raw, firstBody)
			}
		})
	}
	if !strings.Contains(lastLogLine(t), `"cache_status":"MISS"`) {
		t.Fatal("the log entry lacks the cache status")
	}
}

func TestCacheStoresOnlySuccess(t *testing.T) {
	up := newScripted(t, reply{status: 500}, reply{})
	loadFresh(t, site{})
	cfg := target(up.fakeOpenAI, `"cache":{"mode":"simple"}`)
	if resp, _ := chat(t, cfg); resp.StatusCode != 500 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp, _ := chat(t, cfg)
	if resp.StatusCode != 200 || resp.Header.Get("x-gateway-cache-status") != "MISS" {
		t.Fatalf("a failure was cached: %d %s", resp.StatusCode, resp.Header.Get("x-gateway-cache-status"))
	}
	resp, _ = chat(t, cfg)
	wantHeaders(t, resp, "x-gateway-cache-status", "HIT")
}

// TestStreamFromCache: an answer stored from a non-streamed request is
// served to the SDK's streaming call as a well-formed stream, and an
// answer stored from a stream serves a non-streamed request.
func TestStreamFromCache(t *testing.T) {
	up := newScripted(t)
	loadFresh(t, site{})
	cfg := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"simple"}`))
	client := newClient("x-gateway-config", cfg)

	if _, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	params := chatParams("gpt-4o-mini")
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
	if up.count() != 1 {
		t.Fatalf("the stream went upstream (%d calls)", up.count())
	}
	wantHeaders(t, httpResp, "x-gateway-cache-status", "HIT", "content-type", "text/event-stream")
	if acc.Choices[0].Message.Content != "Hello!" || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 12 {
		t.Fatalf("replayed stream: %q %q usage %+v", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, acc.Usage)
	}

	// The other way round: a streamed answer, assembled, serves a plain call.
	other := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"simple"},"override_params":{"temperature":0.7}`))
	client = newClient("x-gateway-config", other)
	stream = client.Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini"))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders(t, httpResp, "x-gateway-cache-status", "HIT")
	if resp.Choices[0].Message.Content != "Hello!" || resp.Usage.TotalTokens != 12 || up.count() != 2 {
		t.Fatalf("assembled answer %q usage %+v after %d calls", resp.Choices[0].Message.Content, resp.Usage, up.count())
	}
}

// TestCacheSurvivesReload: the cache outlives caddy.Load and POST /load
// when the cache size stays the same.
func TestCacheSurvivesReload(t *testing.T) {
	up := newScripted(t)
	loadFresh(t, site{})
	cfg := target(up.fakeOpenAI, `"cache":{"mode":"simple"}`)
	chat(t, cfg)
	loadFresh(t, site{LLM: "api_key second second-key-0123456789"})
	resp, _ := chat(t, cfg)
	wantHeaders(t, resp, "x-gateway-cache-status", "HIT")
	adminLoad(t, site{Before: "handle /other/* {\n\t\tllm_gateway\n\t}"})
	resp, _ = chat(t, cfg)
	wantHeaders(t, resp, "x-gateway-cache-status", "HIT")
	if up.count() != 1 {
		t.Fatalf("%d upstream calls", up.count())
	}
}

func lastLogLine(t testing.TB) string {
	t.Helper()
	lines := gatewayLogLines(t)
	if len(lines) == 0 {
		t.Fatal("no log entry")
	}
	return lines[len(lines)-1]
}
