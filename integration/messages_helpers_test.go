package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"
)

// messagesClient is the official Anthropic SDK pointed at the gateway,
// with the gateway key and the given headers (name, value pairs). The
// SDK's own key goes in x-api-key; the targets' keys are in the configs.
func messagesClient(headers ...string) anthropic.Client {
	base := strings.TrimSuffix(gatewayURL(), "v1")
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey("unused-by-the-gateway"),
		option.WithHeader("x-gateway-api-key", gatewayKey),
		option.WithMaxRetries(0),
		option.WithHTTPClient(reloadSafeClient),
	}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, option.WithHeader(headers[i], headers[i+1]))
	}
	return anthropic.NewClient(opts...)
}

// configHeader is the x-gateway-config header holding a config object.
func configHeader(config string) []string { return []string{"x-gateway-config", config} }

// anthropicTarget is a config target for the Anthropic fake.
func anthropicTarget(up *fakeServer) string {
	return fmt.Sprintf(`{"provider":"anthropic","api_key":%q,"custom_host":%q}`, anthropicKey, up.URL)
}

// openAITarget is a config target for the OpenAI fake.
func openAITarget(up *fakeOpenAI, model string) string {
	return fmt.Sprintf(`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q,"override_params":{"model":%q}}`, up.URL+"/v1", model)
}

// bedrockTarget is a config target for the Bedrock fake, signed with SigV4.
func bedrockTarget(up *fakeBedrock) string {
	return fmt.Sprintf(`{"provider":"bedrock","clouda_access_key_id":%q,"clouda_secret_access_key":%q,"clouda_region":"us-east-1","custom_host":%q}`,
		bedrockAKID, bedrockSecret, up.URL)
}

// vertexTarget is a config target for Vertex AI's fake, with an access
// token as api_key.
func vertexTarget(up *fakeServer) string {
	return fmt.Sprintf(`{"provider":"vertex-ai","api_key":%q,"cloudc_project_id":"msg-project","cloudc_region":"us-east5","custom_host":%q}`, vertexToken, up.URL)
}

// geminiTarget is a config target for the Gemini API's fake.
func geminiTarget(up *fakeServer) string {
	return fmt.Sprintf(`{"provider":"google","api_key":%q,"custom_host":%q}`, googleKey, up.URL)
}

// messagesWeatherTool is the tool of the Messages tool-use tests.
func messagesWeatherTool() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}},
		Required:   []string{"city"},
	}, "get_weather")
}

// userText is a one-turn conversation.
func userText(model, text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// toolChat answers chat completions as an OpenAI-compatible server does
// for the conversations of these tests: a get_weather call when the last
// user turn asks for the weather, the weather after a tool result, and a
// description of what it was sent otherwise, as JSON or a stream with
// usage (the stream's tool arguments arrive in two fragments).
func toolChat(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test-provider" {
		return false // the fake's own answer (a 401 for a wrong key)
	}
	msgs := gjson.GetBytes(body, "messages").Array()
	last := msgs[len(msgs)-1]
	model := gjson.GetBytes(body, "model").String()
	stream := gjson.GetBytes(body, "stream").Bool()
	text, tool := "", false
	switch {
	case last.Get("role").String() == "tool":
		text = "It is sunny in " + gjson.Get(last.Get("content").String(), "city").String() + "."
		if text == "It is sunny in ." {
			text = "It is sunny: " + last.Get("content").String()
		}
	case strings.Contains(last.Get("content").Raw, "weather"):
		tool = true
	default:
		kinds := []string{}
		for _, m := range msgs {
			kinds = append(kinds, m.Get("role").String())
			if !m.Get("content").IsArray() {
				continue
			}
			for _, p := range m.Get("content").Array() {
				kinds = append(kinds, p.Get("type").String())
			}
		}
		text = "seen " + strings.Join(kinds, ",")
	}
	usage := `{"prompt_tokens":40,"completion_tokens":10,"total_tokens":50,"prompt_tokens_details":{"cached_tokens":8}}`
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		msg := `{"role":"assistant","content":` + jsonQuote(text) + `}`
		finish := "stop"
		if tool {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_w1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
			finish = "tool_calls"
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-m1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`, model, msg, finish, usage)
		return true
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-m1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", model, delta, finish)
		fl.Flush()
	}
	if tool {
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_w1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null")
		chunk(`{}`, `"tool_calls"`)
	} else {
		for _, part := range strings.SplitAfter(text, " ") {
			chunk(`{"content":`+jsonQuote(part)+`}`, "null")
		}
		chunk(`{}`, `"stop"`)
	}
	if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-m1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", model, usage)
	}
	io.WriteString(w, "data: [DONE]\n\n")
	fl.Flush()
	return true
}

// newFakeBedrockClaude is the Bedrock fake that also serves Claude models
// through InvokeModel and InvokeModelWithResponseStream in Bedrock's
// Anthropic format: the body must carry anthropic_version
// "bedrock-2023-05-31" and no model or stream (Bedrock refuses them); the
// answer is Anthropic's JSON, the stream Anthropic's events, each in a
// chunk frame's base64 "bytes". CountTokens is served too
// (countTokens). Every other call goes to fakeBedrock.
func newFakeBedrockClaude(t testing.TB) *fakeBedrock {
	f := &fakeBedrock{t: t}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, _ := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
		escID, action, _ := strings.Cut(rest, "/")
		model, _ := url.PathUnescape(escID)
		if action == "count-tokens" {
			f.countTokens(w, r, model)
			return
		}
		if !strings.Contains(model, "anthropic.claude") || (action != "invoke" && action != "invoke-with-response-stream") {
			f.serve(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if err := f.authenticate(r, body); err != nil {
			bedrockError(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
			return
		}
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		if gjson.GetBytes(body, "anthropic_version").String() != "bedrock-2023-05-31" || gjson.GetBytes(body, "model").Exists() ||
			gjson.GetBytes(body, "stream").Exists() || !gjson.GetBytes(body, "max_tokens").Exists() {
			bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: "+string(body))
			return
		}
		rec := httptest.NewRecorder()
		last := gjson.GetBytes(body, "messages.@reverse.0.content").Raw
		switch {
		case strings.Contains(last, "tool_result"):
			anthropicAnswer(rec, action != "invoke", "It is sunny in Paris.", false)
		default:
			anthropicAnswer(rec, action != "invoke", "Bonjour from Bedrock", strings.Contains(last, "weather"))
		}
		if action == "invoke" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(rec.Body.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		enc := eventstream.NewEncoder()
		for _, ev := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n") {
			_, data, _ := strings.Cut(ev, "data: ")
			payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(data))})
			var m eventstream.Message
			m.Headers.Set(":event-type", eventstream.StringValue("chunk"))
			m.Headers.Set(":message-type", eventstream.StringValue("event"))
			m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
			m.Payload = payload
			var buf bytes.Buffer
			_ = enc.Encode(&buf, m)
			fr := buf.Bytes()
			// Frames split across reads, as AWS sends them.
			w.Write(fr[:len(fr)/2])
			fl.Flush()
			w.Write(fr[len(fr)/2:])
			fl.Flush()
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// logFor returns the log entry of the request that answered resp.
func logFor(t testing.TB, resp *http.Response) string {
	t.Helper()
	return logLineFor(t, resp.Header.Get("X-Gateway-Trace-Id"))
}

// countTokens is Bedrock's CountTokens, POST /model/{modelId}/count-tokens:
// signed like every call, a body of {"input":{"invokeModel":{"body":
// <base64 InvokeModel body>}}} whose InvokeModel body must be a valid
// Claude one, foundation model ids only (an inference profile id is a
// ValidationException, as AWS answers). The count is 100 per message
// plus 7, as {"inputTokens":N}.
func (f *fakeBedrock) countTokens(w http.ResponseWriter, r *http.Request, model string) {
	body, _ := io.ReadAll(r.Body)
	if err := f.authenticate(r, body); err != nil {
		bedrockError(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()
	outer := gjson.ParseBytes(body)
	inner, err := base64.StdEncoding.DecodeString(outer.Get("input.invokeModel.body").Str)
	switch {
	case r.Method != http.MethodPost || len(outer.Map()) != 1 || len(outer.Get("input").Map()) != 1 || err != nil:
		bedrockError(w, http.StatusBadRequest, "ValidationException", "1 validation error detected: input")
	case !strings.HasPrefix(model, "anthropic.claude") || strings.HasPrefix(model, "anthropic.claude-v2"):
		bedrockError(w, http.StatusBadRequest, "ValidationException", "The provided model doesn't support counting tokens.")
	case gjson.GetBytes(inner, "anthropic_version").String() != "bedrock-2023-05-31" || gjson.GetBytes(inner, "model").Exists() ||
		gjson.GetBytes(inner, "stream").Exists() || !gjson.GetBytes(inner, "max_tokens").Exists() || !gjson.GetBytes(inner, "messages").IsArray():
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: "+string(inner))
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"inputTokens":%d}`, len(gjson.GetBytes(inner, "messages").Array())*100+7)
	}
}
