package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

// responsesAnthropic is an Anthropic Messages fake that answers from the
// conversation it is sent, so Responses tests can check what the gateway
// replayed: after a tool_result it reports the weather; on "weather" it
// calls get_weather; on "fail" its stream breaks off with an error event
// (the fixture stream_error.sse); with "overflow" in a conversation of
// more than two messages it reports a context overflow; otherwise it
// answers "seen N messages" (N counting the system prompt as one).
func responsesAnthropic(t testing.TB) *fakeServer {
	errorStream := fixture(t, "anthropic", "stream_error.sse")
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Header.Get("x-api-key") != anthropicKey || r.URL.Path != "/v1/messages" {
			writeJSON(w, 401, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
			return
		}
		msgs := gjson.GetBytes(body, "messages").Array()
		n := len(msgs)
		if gjson.GetBytes(body, "system").Exists() {
			n++
		}
		last := msgs[len(msgs)-1]
		lastText := last.Get("content").String()
		if c := last.Get("content"); c.IsArray() {
			lastText = c.Get("#.text").String() + c.Get("#.type").String()
		}
		stream := gjson.GetBytes(body, "stream").Bool()
		switch {
		case strings.Contains(lastText, "overflow") && len(msgs) > 2:
			writeJSON(w, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`))
		case strings.Contains(lastText, "fail") && stream:
			replay(w, "text/event-stream", errorStream)
		case strings.Contains(lastText, "tool_result"):
			anthropicAnswer(w, stream, "It is sunny in Paris.", false)
		case strings.Contains(lastText, "weather"):
			anthropicAnswer(w, stream, "", true)
		default:
			anthropicAnswer(w, stream, fmt.Sprintf("seen %d messages", n), false)
		}
	})
}

// anthropicAnswer writes a Messages answer: text, or a get_weather tool
// call, whole or as Anthropic's event stream.
func anthropicAnswer(w http.ResponseWriter, stream bool, text string, tool bool) {
	usage := `{"input_tokens":21,"output_tokens":7,"cache_read_input_tokens":4}`
	if !stream {
		content := `[{"type":"text","text":` + jsonQuote(text) + `}]`
		stop := "end_turn"
		if tool {
			content = `[{"type":"tool_use","id":"toolu_w1","name":"get_weather","input":{"city":"Paris"}}]`
			stop = "tool_use"
		}
		writeJSON(w, 200, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":`+content+`,"stop_reason":"`+stop+`","usage":`+usage+`}`))
		return
	}
	var sb strings.Builder
	ev := func(name, data string) { sb.WriteString("event: " + name + "\ndata: " + data + "\n\n") }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":21,"output_tokens":1,"cache_read_input_tokens":4}}}`)
	stop := "end_turn"
	if tool {
		stop = "tool_use"
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_w1","name":"get_weather","input":{}}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`)
	} else {
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for _, part := range strings.SplitAfter(text, " ") {
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonQuote(part)+`}}`)
		}
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`"},"usage":{"output_tokens":7}}`)
	ev("message_stop", `{"type":"message_stop"}`)
	replay(w, "text/event-stream", []byte(sb.String()))
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// responsesClient is an openai-go client whose requests go to provider
// at up through the gateway, with headers added.
func responsesClient(provider, url string, headers ...string) openai.Client {
	h := []string{"x-gateway-provider", provider, "x-gateway-custom-host", url}
	if provider == "google" {
		h = append(h, "Authorization", "Bearer "+googleKey)
	}
	return translatedClient(append(h, headers...)...)
}

// bedrockHeaders are the gateway headers reaching the Bedrock fake.
func bedrockHeaders(url string) []string {
	return []string{"x-gateway-provider", "bedrock", "x-gateway-custom-host", url,
		"x-gateway-clouda-access-key-id", bedrockAKID, "x-gateway-clouda-secret-access-key", bedrockSecret,
		"x-gateway-clouda-region", "us-east-1"}
}
