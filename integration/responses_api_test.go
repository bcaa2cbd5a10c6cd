package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// respProvider is one translated provider fake a Responses test runs
// against, and what its plain answer says.
type respProvider struct {
	name  string
	model string
	text  string // the plain answer to "hello"
	// streamText is the streamed answer, when it differs.
	streamText string
	start      func(t *testing.T) (client openai.Client, requests func() int)
}

const (
	geminiText   = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello from Gemini"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3,"totalTokenCount":8},"modelVersion":"gemini-2.5-flash"}`
	geminiStream = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hello \"}]}}],\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"from Gemini\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":3,\"totalTokenCount\":8},\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n"
)

func respProviders() []respProvider {
	return []respProvider{
		{name: "anthropic", model: "claude-sonnet-4-5", text: "seen 1 messages", start: func(t *testing.T) (openai.Client, func() int) {
			up := responsesAnthropic(t)
			loadProviderSite(t)
			return responsesClient("anthropic", up.URL), func() int { up.mu.Lock(); defer up.mu.Unlock(); return len(up.seen) }
		}},
		{name: "bedrock", model: bedrockModel, text: "Hello from Bedrock!", streamText: "Hello, \"wörld\"\n!", start: func(t *testing.T) (openai.Client, func() int) {
			up := newFakeBedrock(t)
			loadProviderSite(t)
			return translatedClient(bedrockHeaders(up.URL)...), func() int { up.mu.Lock(); defer up.mu.Unlock(); return len(up.seen) }
		}},
		{name: "google", model: "gemini-2.5-flash", text: "Hello from Gemini", start: func(t *testing.T) (openai.Client, func() int) {
			up := fakeGemini(t, geminiReplies{Generate: []byte(geminiText), Stream: []byte(geminiStream)})
			loadProviderSite(t)
			return responsesClient("google", up.URL), func() int { up.mu.Lock(); defer up.mu.Unlock(); return len(up.seen) }
		}},
	}
}

func textParams(model, input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
	}
}

func weatherFunction() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		Strict:     openai.Bool(false),
	}}
}

// collect reads a Responses stream, checking that sequence numbers count
// up from 0, that it begins with response.created and ends with exactly
// one terminal event, and returns the events.
func collect(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) []responses.ResponseStreamEventUnion {
	t.Helper()
	var events []responses.ResponseStreamEventUnion
	for s.Next() {
		events = append(events, s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(events) < 3 || events[0].Type != "response.created" || events[1].Type != "response.in_progress" {
		t.Fatalf("stream began %v", eventTypes(events))
	}
	terminals := 0
	for i, e := range events {
		if e.SequenceNumber != int64(i) {
			t.Fatalf("event %d %s has sequence_number %d", i, e.Type, e.SequenceNumber)
		}
		switch e.Type {
		case "response.completed", "response.incomplete", "response.failed":
			terminals++
		}
	}
	if terminals != 1 || !strings.HasPrefix(events[len(events)-1].Type, "response.") {
		t.Fatalf("%d terminal events: %v", terminals, eventTypes(events))
	}
	return events
}

func eventTypes(events []responses.ResponseStreamEventUnion) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

func TestResponsesTranslatedText(t *testing.T) {
	for _, p := range respProviders() {
		t.Run(p.name, func(t *testing.T) {
			client, _ := p.start(t)
			resp, err := client.Responses.New(context.Background(), textParams(p.model, "hello"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp.ID, "resp_") || resp.Status != "completed" || resp.OutputText() != p.text || resp.Object != "response" {
				t.Fatalf("response %s", resp.RawJSON())
			}
			if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
				t.Fatalf("usage %s", resp.Usage.RawJSON())
			}
			// Usage is charged and logged as for chat.
			lines := gatewayLogLines(t)
			want := fmt.Sprintf(`"prompt_tokens":%d`, resp.Usage.InputTokens)
			if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], want) || !strings.Contains(lines[len(lines)-1], `"endpoint":"responses"`) {
				t.Fatalf("log %v lacks %s", lines, want)
			}
		})
	}
}

func TestResponsesTranslatedStream(t *testing.T) {
	for _, p := range respProviders() {
		t.Run(p.name, func(t *testing.T) {
			client, _ := p.start(t)
			events := collect(t, client.Responses.NewStreaming(context.Background(), textParams(p.model, "hello")))
			var text strings.Builder
			for _, e := range events {
				if e.Type == "response.output_text.delta" {
					text.WriteString(e.Delta)
				}
			}
			want := p.text
			if p.streamText != "" {
				want = p.streamText
			}
			last := events[len(events)-1]
			if last.Type != "response.completed" || text.String() != want || last.Response.OutputText() != want || last.Response.Usage.TotalTokens == 0 {
				t.Fatalf("text %q, last %s", text.String(), last.RawJSON())
			}
		})
	}
}

func TestResponsesFunctionCallRoundTrip(t *testing.T) {
	for _, p := range respProviders()[:2] { // anthropic, bedrock
		t.Run(p.name, func(t *testing.T) {
			client, _ := p.start(t)
			params := textParams(p.model, "What is the weather in Paris?")
			params.Tools = []responses.ToolUnionParam{weatherFunction()}
			first, err := client.Responses.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			var call responses.ResponseOutputItemUnion
			for _, it := range first.Output {
				if it.Type == "function_call" {
					call = it
				}
			}
			if call.CallID == "" || call.Name != "get_weather" || gjson.Get(call.Arguments.OfString, "city").String() != "Paris" {
				t.Fatalf("first turn %s", first.RawJSON())
			}
			out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
			out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
			second := responses.ResponseNewParams{
				Model: p.model,
				Tools: params.Tools,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
					responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
					out,
				}},
			}
			resp, err := client.Responses.New(context.Background(), second)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != "completed" || resp.OutputText() == "" {
				t.Fatalf("second turn %s", resp.RawJSON())
			}
			if p.name == "anthropic" && resp.OutputText() != "It is sunny in Paris." {
				t.Fatalf("tool result not carried: %s", resp.OutputText())
			}
		})
	}
}

func TestResponsesStreamedFunctionCall(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	client := responsesClient("anthropic", up.URL)
	params := textParams("claude-sonnet-4-5", "weather in Paris?")
	params.Tools = []responses.ToolUnionParam{weatherFunction()}
	events := collect(t, client.Responses.NewStreaming(context.Background(), params))
	var args, doneArgs, callID string
	for _, e := range events {
		switch e.Type {
		case "response.function_call_arguments.delta":
			args += e.Delta
		case "response.function_call_arguments.done":
			doneArgs = e.Arguments
		case "response.output_item.done":
			if e.Item.Type == "function_call" {
				callID = e.Item.CallID
			}
		}
	}
	last := events[len(events)-1]
	if args != `{"city":"Paris"}` || doneArgs != args || callID != "toolu_w1" || last.Type != "response.completed" || last.Response.Output[0].Type != "function_call" {
		t.Fatalf("args %q done %q call %q; %v", args, doneArgs, callID, eventTypes(events))
	}
}

func TestResponsesChainRetrieveDelete(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	client := responsesClient("anthropic", up.URL)
	ctx := context.Background()
	p1 := textParams("claude-sonnet-4-5", "hello")
	p1.Instructions = openai.String("Be brief.")
	first, err := client.Responses.New(ctx, p1)
	if err != nil {
		t.Fatal(err)
	}
	if first.OutputText() != "seen 2 messages" { // the system prompt and the user turn
		t.Fatalf("first %s", first.RawJSON())
	}
	p2 := textParams("claude-sonnet-4-5", "and again")
	p2.PreviousResponseID = openai.String(first.ID)
	second, err := client.Responses.New(ctx, p2)
	if err != nil {
		t.Fatal(err)
	}
	// user, assistant, user: the history replayed, the instructions not.
	if second.OutputText() != "seen 3 messages" || second.PreviousResponseID != first.ID {
		t.Fatalf("second %s", second.RawJSON())
	}
	if gjson.GetBytes(up.last().Body, "system").Exists() {
		t.Fatal("instructions were inherited")
	}

	got, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != first.ID || got.OutputText() != "seen 2 messages" {
		t.Fatalf("get: %v %v", err, got)
	}
	items, err := client.Responses.InputItems.List(ctx, second.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "message" {
		t.Fatalf("input_items: %v %+v", err, items)
	}
	if err := client.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	seen := len(up.seen)
	_, err = client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if len(up.seen) != seen {
		t.Fatal("a stored-response call reached the translated provider")
	}
}

func TestResponsesWorkspaceScoped(t *testing.T) {
	up := responsesAnthropic(t)
	t.Setenv("OTHER_GATEWAY_KEY", "other-gateway-key-0123456789")
	loadSite(t, site{LLM: "api_key other {env.OTHER_GATEWAY_KEY}"})
	reloadSafeTransport.CloseIdleConnections()
	owner := responsesClient("anthropic", up.URL)
	first, err := owner.Responses.New(context.Background(), textParams("claude-sonnet-4-5", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	other := responsesClient("anthropic", up.URL, "x-gateway-api-key", "other-gateway-key-0123456789")
	_, err = other.Responses.Get(context.Background(), first.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("another workspace read the response: %v", err)
	}
	p := textParams("claude-sonnet-4-5", "again")
	p.PreviousResponseID = openai.String(first.ID)
	if _, err = other.Responses.New(context.Background(), p); !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("another workspace chained the response: %v", err)
	}
}

func TestResponsesStoreFalse(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	client := responsesClient("anthropic", up.URL)
	ctx := context.Background()
	p := textParams("claude-sonnet-4-5", "hello")
	p.Store = openai.Bool(false)
	resp, err := client.Responses.New(ctx, p)
	if err != nil || resp.OutputText() != "seen 1 messages" {
		t.Fatalf("%v %v", err, resp)
	}
	var apiErr *openai.Error
	if _, err = client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{}); !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("get of an unstored response: %v", err)
	}
	p2 := textParams("claude-sonnet-4-5", "again")
	p2.PreviousResponseID = openai.String(resp.ID)
	if _, err = client.Responses.New(ctx, p2); !asOpenAIError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("chaining an unstored response: %v", err)
	}
}

func TestResponsesBoundsBeforeAnyCall(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	meta := `{`
	for i := range 17 {
		if i > 0 {
			meta += ","
		}
		meta += fmt.Sprintf(`"k%d":"v"`, i)
	}
	meta += `}`
	cases := []struct {
		name, body, want string
	}{
		{"metadata pairs", `{"model":"m","input":"hi","metadata":` + meta + `}`, "metadata"},
		{"metadata key", `{"model":"m","input":"hi","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, "metadata"},
		{"metadata value", `{"model":"m","input":"hi","metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, "metadata"},
		{"temperature", `{"model":"m","input":"hi","temperature":2.5}`, "temperature"},
		{"top_p", `{"model":"m","input":"hi","top_p":1.5}`, "top_p"},
		{"truncation", `{"model":"m","input":"hi","truncation":"sometimes"}`, "truncation"},
		{"include", `{"model":"m","input":"hi","include":["everything"]}`, "include"},
		{"built-in tool", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "web_search"},
		{"mcp tool", `{"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"x","server_url":"https://example.com"}]}`, "mcp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := translatedDo(t, "POST", "/responses", []byte(c.body), "x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+anthropicKey)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.want) || gjson.GetBytes(body, "error.type").String() != "invalid_request_error" {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
	if len(up.seen) != 0 {
		t.Fatalf("%d provider calls", len(up.seen))
	}
}

func TestResponsesTruncation(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	client := responsesClient("anthropic", up.URL)
	params := func(mode responses.ResponseNewParamsTruncation) responses.ResponseNewParams {
		return responses.ResponseNewParams{
			Model:      "claude-sonnet-4-5",
			Truncation: mode,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("a long story", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage("indeed", responses.EasyInputMessageRoleAssistant),
				responses.ResponseInputItemParamOfMessage("overflow now", responses.EasyInputMessageRoleUser),
			}},
		}
	}
	cases := []struct {
		mode   responses.ResponseNewParamsTruncation
		status int
		calls  int
	}{
		{responses.ResponseNewParamsTruncationDisabled, http.StatusBadRequest, 1},
		{"", http.StatusBadRequest, 1}, // disabled is the default
		{responses.ResponseNewParamsTruncationAuto, http.StatusOK, 2},
	}
	for _, c := range cases {
		t.Run(string(c.mode), func(t *testing.T) {
			before := len(up.seen)
			resp, err := client.Responses.New(context.Background(), params(c.mode))
			calls := len(up.seen) - before
			if c.status == http.StatusOK {
				if err != nil || resp.OutputText() != "seen 1 messages" || calls != 2 {
					t.Fatalf("%v %v after %d calls", err, resp, calls)
				}
				return
			}
			var apiErr *openai.Error
			if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != c.status || apiErr.Code != "context_length_exceeded" || !strings.Contains(apiErr.Message, "context window") || calls != c.calls {
				t.Fatalf("err %v after %d calls", err, calls)
			}
		})
	}
}

func TestResponsesStreamProviderFailure(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	client := responsesClient("anthropic", up.URL)
	events := collect(t, client.Responses.NewStreaming(context.Background(), textParams("claude-sonnet-4-5", "please fail")))
	var text string
	for _, e := range events {
		if e.Type == "response.output_text.delta" {
			text += e.Delta
		}
	}
	last := events[len(events)-1]
	if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error.Message == "" || text != "Hel" {
		t.Fatalf("text %q last %s", text, last.RawJSON())
	}
}

func TestResponsesFallbackNativeToTranslated(t *testing.T) {
	native := newFakeOpenAI(t)
	native.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`)
		return true
	}
	up := responsesAnthropic(t)
	loadProviderSite(t)
	config := fmt.Sprintf(`{"strategy":{"mode":"fallback"},"targets":[%s,{"provider":"anthropic","api_key":%q,"custom_host":%q}]}`,
		target(native, ""), anthropicKey, up.URL)
	client := translatedClient("x-gateway-config", compactJSON(t, config))
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			var text string
			if stream {
				events := collect(t, client.Responses.NewStreaming(context.Background(), textParams("claude-sonnet-4-5", "hello")))
				last := events[len(events)-1]
				if last.Type != "response.completed" {
					t.Fatalf("%v", eventTypes(events))
				}
				text = last.Response.OutputText()
			} else {
				resp, err := client.Responses.New(context.Background(), textParams("claude-sonnet-4-5", "hello"))
				if err != nil {
					t.Fatal(err)
				}
				text = resp.OutputText()
			}
			if text != "seen 1 messages" {
				t.Fatalf("text %q", text)
			}
			// The native target was sent the client's Responses body as is.
			n := native.last()
			if n.Path != "/v1/responses" || gjson.GetBytes(n.Body, "input").String() != "hello" || gjson.GetBytes(n.Body, "messages").Exists() {
				t.Fatalf("native target got %s %s", n.Path, n.Body)
			}
		})
	}
	lines := gatewayLogLines(t)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"provider":"anthropic"`) {
		t.Fatalf("log %v", lines)
	}
}

// TestResponsesCachedPerTarget: a translated target caches the chat
// completion it was sent, so an identical Responses request is a HIT, and
// still a new response with its own id, stored for retrieval.
func TestResponsesCachedPerTarget(t *testing.T) {
	up := responsesAnthropic(t)
	loadProviderSite(t)
	config := fmt.Sprintf(`{"provider":"anthropic","api_key":%q,"custom_host":%q,"cache":{"mode":"simple"}}`, anthropicKey, up.URL)
	client := translatedClient("x-gateway-config", config)
	var ids []string
	for i, want := range []string{"MISS", "HIT"} {
		var raw *http.Response
		resp, err := client.Responses.New(context.Background(), textParams("claude-sonnet-4-5", "cache me"), option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := raw.Header.Get("x-gateway-cache-status"); got != want || resp.OutputText() != "seen 1 messages" {
			t.Fatalf("request %d: cache %q, %s", i, got, resp.RawJSON())
		}
		ids = append(ids, resp.ID)
	}
	if ids[0] == ids[1] || len(up.seen) != 1 {
		t.Fatalf("ids %v, %d provider calls", ids, len(up.seen))
	}
	if got, err := client.Responses.Get(context.Background(), ids[1], responses.ResponseGetParams{}); err != nil || got.ID != ids[1] {
		t.Fatalf("cached response not stored: %v", err)
	}
}

// TestResponsesNativePassThrough: a native target gets the client's body
// and path as sent and its stream passes through untouched; the usage of
// its terminal event is accounted.
func TestResponsesNativePassThrough(t *testing.T) {
	native := newFakeOpenAI(t)
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_native\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_native\",\"object\":\"response\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":31,\"output_tokens\":5,\"total_tokens\":36}}}\n\n"
	native.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/responses" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
		return true
	}
	loadProviderSite(t)
	body := `{"model":"gpt-4.1","input":"hi","tools":[{"type":"web_search"}],"stream":true}`
	resp, raw := translatedDo(t, "POST", "/responses", []byte(body), "x-gateway-provider", "openai", "x-gateway-custom-host", native.URL, "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 || string(raw) != stream || string(native.last().Body) != body {
		t.Fatalf("%d %s; upstream got %s", resp.StatusCode, raw, native.last().Body)
	}
	lines := gatewayLogLines(t)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"prompt_tokens":31`) {
		t.Fatalf("usage not accounted: %v", lines)
	}
	// An id the gateway did not store is the native provider's to answer.
	resp, raw = translatedDo(t, "GET", "/responses/resp_native", nil, "x-gateway-provider", "openai", "x-gateway-custom-host", native.URL, "Authorization", "Bearer sk-test-provider")
	if n := native.last(); n.Method != "GET" || n.Path != "/v1/responses/resp_native" || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s; upstream got %s %s", resp.StatusCode, raw, n.Method, n.Path)
	}
}

// responsesRedisDB is the Redis database TestResponsesStoredInRedis uses.
const responsesRedisDB = 11

// TestResponsesStoredInRedis: with llm { redis … } the records go to
// Redis, expiring with responses_retention, and chaining reads them back.
func TestResponsesStoredInRedis(t *testing.T) {
	rc := redistest.Client(t, responsesRedisDB)
	up := responsesAnthropic(t)
	loadSite(t, site{LLM: fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}\n\t\tresponses_retention 2h", redistest.Addr(), responsesRedisDB)})
	reloadSafeTransport.CloseIdleConnections()
	client := responsesClient("anthropic", up.URL)
	first, err := client.Responses.New(context.Background(), textParams("claude-sonnet-4-5", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := rc.Keys(context.Background(), "*"+first.ID+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v", keys, err)
	}
	t.Cleanup(func() { rc.Del(context.Background(), keys...) })
	if ttl := rc.TTL(context.Background(), keys[0]).Val(); ttl <= time.Hour || ttl > 2*time.Hour {
		t.Fatalf("ttl %v, want the 2h retention", ttl)
	}
	p := textParams("claude-sonnet-4-5", "again")
	p.PreviousResponseID = openai.String(first.ID)
	second, err := client.Responses.New(context.Background(), p)
	if err != nil || second.OutputText() != "seen 3 messages" {
		t.Fatalf("%v %v", err, second)
	}
	if k, _ := rc.Keys(context.Background(), "*"+second.ID+"*").Result(); len(k) == 1 {
		t.Cleanup(func() { rc.Del(context.Background(), k...) })
	}
}
