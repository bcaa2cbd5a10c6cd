package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// streamEvents sends a streamed chat completion and returns the status,
// content type and the data payloads of the events, in order.
func streamEvents(t *testing.T, config string) (int, string, []string, []byte) {
	t.Helper()
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, raw := do(t, "POST", "/chat/completions", []byte(body), "x-gateway-config", compactJSON(t, config))
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data, raw
}

// TestGuardrailsStreams: input checks decide before the first byte (a 446
// JSON body, never a half stream); output checks judge the assembled text
// and report in a last event before [DONE]; a denying output check holds
// the stream and withholds it whole.
func TestGuardrailsStreams(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cases := []struct {
		name   string
		hooks  string
		status int
		calls  int
		// results: the verdicts of the final event, before then after.
		before, after string
	}{
		{"input deny", `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true},"deny":true}]`, 446, 0, "", ""},
		{"input fail", `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true}}]`, 246, 1, "false", ""},
		{"output pass", `"output_guardrails":[{"default.regexMatch":{"rule":"^Hello!$"}}]`, 200, 1, "", "true"},
		{"output fail", `"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"}}]`, 200, 1, "", "false"},
		{"output pass held", `"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"all"},"deny":true}]`, 200, 1, "", "true"},
		{"output fail held", `"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"},"on_fail":{"deny":true}}]`, 446, 1, "", ""},
		{"both", `"input_guardrails":[{"default.wordCount":{"minWords":1,"maxWords":3}}],"output_guardrails":[{"default.notNull":{}}]`, 200, 1, "true", "true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := up.count()
			status, ct, data, raw := streamEvents(t, guardConfig(up, tc.hooks))
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, raw)
			}
			if up.count()-n != tc.calls {
				t.Fatalf("provider called %d times, want %d", up.count()-n, tc.calls)
			}
			if status == 446 {
				if !strings.HasPrefix(ct, "application/json") || strings.Contains(string(raw), "chat.completion.chunk") || strings.Contains(string(raw), "data: ") {
					t.Fatalf("a denied stream must be one JSON body, got %s %s", ct, raw)
				}
				resultsOf(t, raw)
				return
			}
			if len(data) < 3 || data[len(data)-1] != "[DONE]" {
				t.Fatalf("events = %q", data)
			}
			last := data[len(data)-2]
			hr := resultsOf(t, []byte(last))
			verdicts := func(rs []hookResult) string {
				var v []string
				for _, r := range rs {
					v = append(v, map[bool]string{true: "true", false: "false"}[r.Verdict])
				}
				return strings.Join(v, ",")
			}
			if verdicts(hr.Before) != tc.before || verdicts(hr.After) != tc.after {
				t.Fatalf("final event %s, want before %q after %q", last, tc.before, tc.after)
			}
			var text strings.Builder
			for _, d := range data[:len(data)-2] {
				var c openai.ChatCompletionChunk
				if err := json.Unmarshal([]byte(d), &c); err != nil || len(c.Choices) == 0 {
					t.Fatalf("not a chunk before the results: %s", d)
				}
				text.WriteString(c.Choices[0].Delta.Content)
			}
			if text.String() != "Hello!" {
				t.Fatalf("streamed text %q", text.String())
			}
		})
	}
}

// TestGuardrailsStreamSDK: the SDK reads a guarded stream to its end, the
// results event included, and gets a denied stream as an error before any
// chunk.
func TestGuardrailsStreamSDK(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	params := chatParams("gpt-4o-mini")

	client := guardClient(t, guardConfig(up, `"output_guardrails":[{"default.endsWith":{"suffix":"!"}}]`))
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	var results string
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		if strings.Contains(c.RawJSON(), "hook_results") {
			results = c.RawJSON()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "Hello!" || !strings.Contains(results, `"verdict":true`) {
		t.Fatalf("content %q, results %s", acc.Choices[0].Message.Content, results)
	}

	client = guardClient(t, guardConfig(up, `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true},"deny":true}]`))
	stream = client.Chat.Completions.NewStreaming(context.Background(), params)
	chunks := 0
	for stream.Next() {
		chunks++
	}
	var apiErr *openai.Error
	if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 446 || apiErr.Type != "hooks_failed" || chunks != 0 {
		t.Fatalf("err %v, %d chunks", stream.Err(), chunks)
	}
}

// TestGuardrailsFallbackOn446: a 446 counts like a provider status:
// fallback moves to a sibling without the hook, and retry on_status_codes
// retries it (the provider is never called by the denied target).
func TestGuardrailsFallbackOn446(t *testing.T) {
	denied, open := newFakeOpenAI(t), newFakeOpenAI(t)
	loadFresh(t, site{})
	deny := `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true},"deny":true}]`
	cfg := `{"strategy":{"mode":"fallback","on_status_codes":[446]},"targets":[` + target(denied, deny) + `,` + target(open, "") + `]}`
	client := guardClient(t, cfg)
	var httpResp *http.Response
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello!" || httpResp.StatusCode != 200 || denied.count() != 0 || open.count() != 1 {
		t.Fatalf("status %d, calls %d/%d", httpResp.StatusCode, denied.count(), open.count())
	}
	if got := lastAttempts(t); got != "config.targets[0]:fallback:446 config.targets[1]:ok:200" {
		t.Fatalf("attempts %s", got)
	}

	// Fallback that does not list 446 stops at it.
	cfg = `{"strategy":{"mode":"fallback","on_status_codes":[429]},"targets":[` + target(denied, deny) + `,` + target(open, "") + `]}`
	if resp, body := chat(t, cfg); resp.StatusCode != 446 || open.count() != 1 {
		t.Fatalf("status %d (%s), open called %d", resp.StatusCode, body, open.count())
	}

	// Retry on 446: every attempt is judged again, none reaches the provider.
	cfg = target(denied, deny+`,"retry":{"attempts":2,"on_status_codes":[446]}`)
	if resp, body := chat(t, cfg); resp.StatusCode != 446 || denied.count() != 0 {
		t.Fatalf("status %d (%s), calls %d", resp.StatusCode, body, denied.count())
	}
	if got := lastAttempts(t); got != "config:retry:446 config:retry:446 config:error:446" {
		t.Fatalf("attempts %s", got)
	}
}

// TestGuardrailsOutputDenyFallsBack: an answer withheld by an output
// guardrail is a 446 the parent's fallback moves on from.
func TestGuardrailsOutputDenyFallsBack(t *testing.T) {
	first, second := newFakeOpenAI(t), newFakeOpenAI(t)
	loadFresh(t, site{})
	deny := `"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"},"deny":true}]`
	cfg := `{"strategy":{"mode":"fallback"},"targets":[` + target(first, deny) + `,` + target(second, "") + `]}`
	resp, body := chat(t, cfg)
	if resp.StatusCode != 200 || first.count() != 1 || second.count() != 1 || strings.Contains(string(body), "hook_results") {
		t.Fatalf("status %d calls %d/%d: %s", resp.StatusCode, first.count(), second.count(), body)
	}
}

// TestGuardrailsSaved: the string form of input_guardrails names a
// guardrail saved in the llm app; its id is the one results report.
func TestGuardrailsSaved(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{LLM: "guardrail no-hi `{\"default.regexMatch\":{\"rule\":\"hi\",\"not\":true},\"deny\":true}`\n" +
		"\t\tguardrail polite `{\"type\":\"guardrail\",\"checks\":[{\"id\":\"default.endsWith\",\"parameters\":{\"suffix\":\"!\"}}]}`"})
	_, hr := sdkDenial(t, guardClient(t, guardConfig(up, `"input_guardrails":["no-hi"]`)))
	if len(hr.Before) != 1 || hr.Before[0].ID != "no-hi" || up.count() != 0 {
		t.Fatalf("hook_results %+v, calls %d", hr, up.count())
	}
	resp, body := chat(t, guardConfig(up, `"output_guardrails":["polite"]`))
	if hr := resultsOf(t, body); resp.StatusCode != 200 || len(hr.After) != 1 || hr.After[0].ID != "polite" || !hr.After[0].Verdict {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	resp, body = chat(t, guardConfig(up, `"input_guardrails":["nope"]`))
	if resp.StatusCode != 400 || !strings.Contains(string(body), `\"nope\"`) {
		t.Fatalf("unknown id: status %d %s", resp.StatusCode, body)
	}
	// A definition that cannot compile fails the load, naming it.
	err := tryLoad(site{LLM: "guardrail bad `{\"default.regexMatch\":{\"rule\":\"(?<=x)\"}}`"})
	if err == nil || !strings.Contains(err.Error(), `guardrail "bad"`) {
		t.Fatalf("load error %v", err)
	}
}

// hookServer is a webhook endpoint on 127.0.0.1 that answers with a
// verdict once release is closed, and records the bodies it was sent.
type hookServer struct {
	*httptest.Server
	release chan struct{}
	mu      sync.Mutex
	bodies  [][]byte
	got     chan struct{}
}

func newHookServer(t *testing.T, answer string) *hookServer {
	h := &hookServer{release: make(chan struct{}), got: make(chan struct{}, 16)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		<-h.release
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
		h.got <- struct{}{}
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	return h
}

// TestGuardrailsAsyncWebhook: an async webhook hook never delays the
// answer (the webhook is still blocked when the answer arrives) and
// still runs afterwards, with its results logged under the trace id.
func TestGuardrailsAsyncWebhook(t *testing.T) {
	up := newFakeOpenAI(t)
	hook := newHookServer(t, `{"verdict":false}`)
	loadFresh(t, site{})
	hooks := `"before_request_hooks":[{"id":"audit","async":true,"deny":true,"checks":[{"id":"default.webhook","parameters":{"webhookURL":"` + hook.URL + `/audit","timeout":20000}}]}]`
	resp, body := chat(t, guardConfig(up, hooks), "x-gateway-trace-id", "guard-async-1")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello!") || strings.Contains(string(body), "hook_results") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	// The webhook has not answered yet (it waits for release): the answer
	// did not wait for it.
	close(hook.release)
	select {
	case <-hook.got:
	case <-time.After(20 * time.Second):
		t.Fatal("the async webhook never ran")
	}
	hook.mu.Lock()
	sent := string(hook.bodies[0])
	hook.mu.Unlock()
	if !strings.Contains(sent, `"eventType":"beforeRequestHook"`) {
		t.Fatalf("webhook got %s", sent)
	}
	var line string
	for i := 0; i < 500 && line == ""; i++ {
		for _, l := range strings.Split(readLog(t), "\n") {
			if strings.Contains(l, `"msg":"llm async hooks"`) && strings.Contains(l, `"trace_id":"guard-async-1"`) {
				line = l
			}
		}
	}
	if !strings.Contains(line, `"id":"audit"`) || !strings.Contains(line, `"async":true`) || !strings.Contains(line, `"verdict":false`) {
		t.Fatalf("async results not logged: %q", line)
	}
}

// TestGuardrailsWebhookEgress: a sync webhook's verdict and transformed
// request are honoured, and webhooks go through custom_host_allow: with
// loopback not allowed, the call is refused and the check errors (which
// passes the hook unless failOnError).
func TestGuardrailsWebhookEgress(t *testing.T) {
	up := newFakeOpenAI(t)
	hook := newHookServer(t, `{"verdict":true,"transformedData":{"request":{"json":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"rewritten"}]}}}}`)
	close(hook.release)
	hooks := `"before_request_hooks":[{"id":"wh","checks":[{"id":"default.webhook","parameters":{"webhookURL":"` + hook.URL + `","failOnError":true}}],"deny":true}]`

	loadFresh(t, site{})
	resp, body := chat(t, guardConfig(up, hooks))
	if resp.StatusCode != 200 || !strings.Contains(string(up.last().Body), `"rewritten"`) {
		t.Fatalf("status %d (%s); provider got %s", resp.StatusCode, body, up.last().Body)
	}

	// Only the provider's own (private) address is allowed: the webhook
	// on loopback is refused by the egress guard.
	loadFresh(t, site{Gateway: "custom_host_allow 10.0.0.0/8"})
	n := up.count()
	resp, body = do(t, "POST", "/chat/completions", []byte(chatBody), "x-gateway-config", compactJSON(t, `{"provider":"openai","api_key":"k","custom_host":"http://10.255.255.1:1",`+hooks+`}`))
	if resp.StatusCode != 446 || up.count() != n || !strings.Contains(string(body), `"error":{"name"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}

// TestGuardrailsTranslatedStream: a provider whose stream the gateway
// translates (Anthropic) is judged the same way, live and held.
func TestGuardrailsTranslatedStream(t *testing.T) {
	up := fakeAnthropic(t, nil, fixture(t, "anthropic", "stream_tools.sse"))
	loadProviderSite(t)
	cases := []struct {
		name, hooks string
		deny        bool
	}{
		{"live", `[{"default.contains":{"words":["weather"],"operator":"all"}}]`, false},
		{"held, passes", `[{"default.contains":{"words":["weather"],"operator":"all"},"deny":true}]`, false},
		{"held, denied", `[{"default.contains":{"words":["weather"],"operator":"none"},"deny":true}]`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := anthropicClient(up, "x-gateway-config", `{"provider":"anthropic","api_key":"sk-test-provider","custom_host":"`+up.URL+`","output_guardrails":`+tc.hooks+`}`)
			stream := client.Chat.Completions.NewStreaming(context.Background(), toolTurnParams("claude-sonnet-4-5"))
			var acc openai.ChatCompletionAccumulator
			var results string
			for stream.Next() {
				c := stream.Current()
				if strings.Contains(c.RawJSON(), "hook_results") {
					results = c.RawJSON()
					continue
				}
				acc.AddChunk(c)
			}
			var apiErr *openai.Error
			if tc.deny {
				if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 446 || len(acc.Choices) != 0 {
					t.Fatalf("err %v, choices %d", stream.Err(), len(acc.Choices))
				}
				return
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content != "Okay, let me check the weather.\n" || !strings.Contains(results, `"after_request_hooks":[{"verdict":true`) {
				t.Fatalf("content %q results %s", acc.Choices[0].Message.Content, results)
			}
		})
	}
}

// TestGuardrailsWithCache: hooks judge answers served from the cache too:
// input checks run before the lookup, output checks on the stored answer.
func TestGuardrailsWithCache(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cfg := guardConfig(up, `"cache":{"mode":"simple"},"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"}}]`)
	for i, want := range []string{"MISS", "HIT"} {
		resp, body := chat(t, cfg)
		if resp.StatusCode != 246 || resp.Header.Get("x-gateway-cache-status") != want || up.count() != 1 {
			t.Fatalf("request %d: status %d cache %s calls %d: %s", i, resp.StatusCode, resp.Header.Get("x-gateway-cache-status"), up.count(), body)
		}
		if hr := resultsOf(t, body); len(hr.After) != 1 || hr.After[0].Verdict {
			t.Fatalf("request %d: %s", i, body)
		}
	}
	// The same cached answer, now denied by an output guardrail of the
	// target (the cache key ignores hooks).
	deny := guardConfig(up, `"cache":{"mode":"simple"},"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"},"deny":true}]`)
	if resp, body := chat(t, deny); resp.StatusCode != 446 || up.count() > 2 {
		t.Fatalf("status %d calls %d: %s", resp.StatusCode, up.count(), body)
	}
	// An input guardrail denies before the cache is asked.
	in := guardConfig(up, `"cache":{"mode":"simple"},"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true},"deny":true}]`)
	if resp, body := chat(t, in); resp.StatusCode != 446 || resp.Header.Get("x-gateway-cache-status") == "HIT" {
		t.Fatalf("status %d cache %s: %s", resp.StatusCode, resp.Header.Get("x-gateway-cache-status"), body)
	}
}

// TestGuardrailsHeldStreamBounded: a stream held for a denying output
// check is bounded by max_response_body; a longer one fails with a 502
// and nothing of it reaches the client.
func TestGuardrailsHeldStreamBounded(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{Gateway: "custom_host_allow loopback\n\t\t\tmax_response_body 300"})
	status, ct, _, raw := streamEvents(t, guardConfig(up, `"output_guardrails":[{"default.notNull":{},"deny":true}]`))
	if status != 502 || !strings.HasPrefix(ct, "application/json") || !strings.Contains(string(raw), "response_too_large") {
		t.Fatalf("status %d %s: %s", status, ct, raw)
	}
	// Without deny the stream is not held: it flows whatever its size.
	status, _, data, raw := streamEvents(t, guardConfig(up, `"output_guardrails":[{"default.notNull":{}}]`))
	if status != 200 || len(data) < 4 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("status %d: %s", status, raw)
	}
}
