package responses

import (
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

	"github.com/caddyserver/certmagic"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// adapterServer is the reference wiring of this package around a chat
// call, as the gateway's pipeline does it for a translated target: the
// chat call here is a fake provider that already speaks OpenAI chat (as
// the gateway's translators make every provider do).
type adapterServer struct {
	store *Store
	chat  func(body []byte) (int, []byte)

	mu        sync.Mutex
	chatCalls [][]byte
}

func (a *adapterServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ws := req.Header.Get("Authorization") // the workspace of the gateway key
	ctx := req.Context()
	rest := strings.TrimPrefix(req.URL.Path, "/v1/responses")
	id, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case req.Method == http.MethodPost && rest == "":
		a.create(w, req, ws)
	case req.Method == http.MethodGet && sub == "input_items":
		q, err := ParseListQuery(req.URL.Query())
		if err == nil {
			var body []byte
			if body, err = a.store.InputItems(ctx, ws, id, q); err == nil {
				_, _ = w.Write(body)
				return
			}
		}
		apierror.Write(w, apierror.As(err))
	case req.Method == http.MethodGet && sub == "":
		rec, err := a.store.Get(ctx, ws, id)
		if err != nil {
			apierror.Write(w, apierror.As(err))
			return
		}
		_, _ = w.Write(rec.Response)
	case req.Method == http.MethodDelete && sub == "":
		body, err := a.store.Delete(ctx, ws, id)
		if err != nil {
			apierror.Write(w, apierror.As(err))
			return
		}
		_, _ = w.Write(body)
	default:
		http.NotFound(w, req)
	}
}

func (a *adapterServer) create(w http.ResponseWriter, req *http.Request, ws string) {
	ctx := req.Context()
	body, _ := io.ReadAll(req.Body)
	r, err := Parse(body)
	if err != nil {
		apierror.Write(w, apierror.As(err))
		return
	}
	var history []Item
	if r.PreviousResponseID != "" {
		if history, err = a.store.Chain(ctx, ws, r.PreviousResponseID); err != nil {
			apierror.Write(w, apierror.As(err))
			return
		}
	}
	items, err := a.store.ResolveReferences(ctx, ws, r.Conversation(history))
	if err != nil {
		apierror.Write(w, apierror.As(err))
		return
	}
	save := func(resp *Response) error {
		if !r.Stored() {
			return nil
		}
		return a.store.Save(ctx, RecordOf(ws, r, resp))
	}
	for retried := false; ; retried = true {
		chatBody, err := ToChat(r, items)
		if err != nil {
			apierror.Write(w, apierror.As(err))
			return
		}
		a.mu.Lock()
		a.chatCalls = append(a.chatCalls, chatBody)
		a.mu.Unlock()
		status, answer := a.chat(chatBody)
		if status != http.StatusOK {
			if IsContextOverflow(status, answer) {
				if shorter, ok := DropOldest(items); ok && r.TruncationAuto() && !retried {
					items = shorter
					continue
				}
				apierror.Write(w, OverflowError())
				return
			}
			w.WriteHeader(status)
			_, _ = w.Write(answer)
			return
		}
		if r.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			sw := NewStreamWriter(w, r)
			sw.BeforeTerminal = save
			_, err := sw.Write(answer)
			_ = sw.Close(err)
			return
		}
		resp, err := FromChat(answer, r)
		if err == nil {
			err = save(resp)
		}
		if err != nil {
			apierror.Write(w, apierror.As(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp.JSON())
		return
	}
}

// fakeChat plays a provider behind the gateway's chat translators: it
// calls get_weather when asked about weather and no tool result is in the
// conversation, answers with the tool result when there is one, fails
// mid-stream on "fail", overflows when the conversation has more than
// six messages, and otherwise echoes how many messages it saw.
func fakeChat(body []byte) (int, []byte) {
	msgs := gjson.GetBytes(body, "messages").Array()
	last := msgs[len(msgs)-1]
	stream := gjson.GetBytes(body, "stream").Bool()
	if len(msgs) > 6 {
		return 400, []byte(`{"error":{"message":"prompt is too long: 300000 tokens > 200000 maximum","type":"invalid_request_error","param":null,"code":null}}`)
	}
	usage := `{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}`
	text := ""
	var toolCall bool
	switch {
	case last.Get("role").Str == "tool":
		text = "It is " + last.Get("content").Str + " in Paris."
	case strings.Contains(last.Get("content").Str, "weather"):
		toolCall = true
	default:
		text = "seen " + itoa(len(msgs)) + " messages"
	}
	if !stream {
		msg := `{"role":"assistant","content":` + string(jsonString(text)) + `,"reasoning_content":"thinking"}`
		finish := "stop"
		if toolCall {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
			finish = "tool_calls"
		}
		return 200, []byte(`{"id":"c1","object":"chat.completion","created":0,"model":"claude-x","choices":[{"index":0,"message":` + msg + `,"finish_reason":"` + finish + `"}],"usage":` + usage + `}`)
	}
	chunk := func(delta, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"claude-x","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + "}]}\n\n"
	}
	var sb strings.Builder
	sb.WriteString(chunk(`{"role":"assistant","content":""}`, ""))
	if strings.Contains(last.Get("content").Str, "fail") {
		sb.WriteString(chunk(`{"content":"partial"}`, ""))
		sb.WriteString(`data: {"error":{"message":"Overloaded","type":"overloaded_error","param":null,"code":null}}` + "\n\n")
		return 200, []byte(sb.String())
	}
	if toolCall {
		sb.WriteString(chunk(`{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""))
		sb.WriteString(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, ""))
		sb.WriteString(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, ""))
		sb.WriteString(chunk(`{}`, "tool_calls"))
	} else {
		for _, w := range strings.SplitAfter(text, " ") {
			sb.WriteString(chunk(`{"content":`+string(jsonString(w))+`}`, ""))
		}
		sb.WriteString(chunk(`{}`, "stop"))
	}
	sb.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":0,"model":"claude-x","choices":[],"usage":` + usage + "}\n\ndata: [DONE]\n\n")
	return 200, []byte(sb.String())
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func newAdapter(t *testing.T) (*adapterServer, openai.Client) {
	a := &adapterServer{store: NewStore(&certmagic.FileStorage{Path: t.TempDir()}, StoreConfig{}), chat: fakeChat}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("workspace-1"), option.WithMaxRetries(0), option.WithRequestTimeout(10*time.Second))
	return a, client
}

var weatherTool = responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)

// TestSDKFunctionRoundTripAndChain drives openai-go's Responses client:
// a function call, its output sent back with previous_response_id, a
// third chained turn, retrieve, input_items and delete.
func TestSDKFunctionRoundTripAndChain(t *testing.T) {
	a, client := newAdapter(t)
	ctx := context.Background()
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "claude-x",
		Instructions: openai.String("Use tools."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Paris?")},
		Tools:        []responses.ToolUnionParam{weatherTool},
	})
	if err != nil {
		t.Fatal(err)
	}
	call := r1.Output[len(r1.Output)-1]
	if call.Type != "function_call" || call.Name != "get_weather" || call.CallID != "toolu_1" {
		t.Fatalf("output %+v", r1.Output)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("18C")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "claude-x",
		PreviousResponseID: openai.String(r1.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}},
		Tools:              []responses.ToolUnionParam{weatherTool},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r2.OutputText() != "It is 18C in Paris." || r2.Usage.InputTokensDetails.CachedTokens != 3 || r2.Usage.OutputTokensDetails.ReasoningTokens != 2 {
		t.Fatalf("turn 2: %q %+v", r2.OutputText(), r2.Usage)
	}
	// The second chat call replayed turn 1 without its instructions.
	second := gjson.GetBytes(a.chatCalls[1], "messages").Raw
	if strings.Contains(second, "Use tools.") || !strings.Contains(second, `"tool_call_id":"toolu_1"`) || !strings.Contains(second, "weather in Paris?") {
		t.Fatalf("second chat call messages: %s", second)
	}
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "claude-x",
		PreviousResponseID: openai.String(r2.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("thanks")},
	})
	if err != nil {
		t.Fatal(err)
	}
	// user, assistant tool call, tool, assistant, user.
	if r3.OutputText() != "seen 5 messages" {
		t.Fatalf("turn 3 saw: %q", r3.OutputText())
	}
	got, err := client.Responses.Get(ctx, r2.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != r2.OutputText() || got.PreviousResponseID != r1.ID {
		t.Fatalf("Get: %+v %v", got, err)
	}
	items, err := client.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "function_call_output" {
		t.Fatalf("input_items: %+v %v", items, err)
	}
	if err := client.Responses.Delete(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("Get after delete: %v", err)
	}
	// The chain through the deleted turn is gone: a 400 as OpenAI answers.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "claude-x", PreviousResponseID: openai.String(r2.ID), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("again")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("chain through a deleted response: %v", err)
	}
}

func TestSDKStoreFalseAndWorkspaces(t *testing.T) {
	_, client := newAdapter(t)
	ctx := context.Background()
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Store: openai.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil || r.JSON.ExtraFields["store"].Raw() != "false" {
		t.Fatalf("%+v %v", r, err)
	}
	var apiErr *openai.Error
	if _, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("Get of store:false: %v", err)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r.ID), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "not found") {
		t.Fatalf("previous_response_id of store:false: %v", err)
	}
	kept, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Get(ctx, kept.ID, responses.ResponseGetParams{}, option.WithAPIKey("workspace-2")); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("other workspace read: %v", err)
	}
}

func TestSDKStreaming(t *testing.T) {
	_, client := newAdapter(t)
	ctx := context.Background()
	cases := []struct {
		name, input, terminal, text string
	}{
		{"text", "hello there", "response.completed", "seen 1 messages"},
		{"function call", "weather in Paris?", "response.completed", ""},
		{"provider fails mid-stream", "please fail", "response.failed", "partial"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: "claude-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(c.input)}, Tools: []responses.ToolUnionParam{weatherTool},
			})
			var last responses.ResponseStreamEventUnion
			var deltas, args string
			for stream.Next() {
				last = stream.Current()
				switch last.Type {
				case "response.output_text.delta":
					deltas += last.Delta
				case "response.function_call_arguments.delta":
					args += last.Delta
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if last.Type != c.terminal || deltas != c.text {
				t.Fatalf("ended with %s, text %q", last.Type, deltas)
			}
			if c.name == "function call" {
				fc := last.Response.Output[0]
				if args != `{"city":"Paris"}` || fc.Arguments.OfString != args || fc.CallID != "toolu_1" {
					t.Fatalf("function call %+v, deltas %q", fc, args)
				}
			}
			if c.terminal == "response.completed" {
				// Stored before the terminal event: retrievable at once.
				got, err := client.Responses.Get(ctx, last.Response.ID, responses.ResponseGetParams{})
				if err != nil || got.Usage.TotalTokens != 18 {
					t.Fatalf("Get after stream: %+v %v", got, err)
				}
			}
		})
	}
}

// TestSDKTruncation: a chain long enough to overflow the fake provider is
// a 400 with truncation disabled and succeeds with auto after dropping
// the oldest turns.
func TestSDKTruncation(t *testing.T) {
	a, client := newAdapter(t)
	ctx := context.Background()
	prev := ""
	for i := range 3 { // 3 turns = 6 items
		p := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("turn " + itoa(i))}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		prev = r.ID
	}
	next := responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(prev), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("turn 3")}}
	_, err := client.Responses.New(ctx, next)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Fatalf("truncation disabled: %v", err)
	}
	next.Truncation = responses.ResponseNewParamsTruncationAuto
	n := len(a.chatCalls)
	r, err := client.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.chatCalls) != n+2 || r.OutputText() != "seen 3 messages" {
		t.Fatalf("auto: %d calls, %q", len(a.chatCalls)-n, r.OutputText())
	}
	if r.Truncation != "auto" {
		t.Fatalf("truncation echo %q", r.Truncation)
	}
}

func TestSDKBuiltInToolRefused(t *testing.T) {
	_, client := newAdapter(t)
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "claude-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "web_search") {
		t.Fatalf("%v", err)
	}
}
