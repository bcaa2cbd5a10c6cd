package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	assestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	ossestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"
)

// Hardening round 4 (issue 34) on the Messages API and the answer paths
// around it: a stream that ends early is charged what it delivered, a
// stream cut in the middle of an event ends with an error event the
// official SDKs read, and output guardrails judge every answer path.

// cutText is the text a cut stream delivers before it breaks: 58
// characters, which the gateway's estimate (four characters a token,
// rounded up) counts as 15 output tokens.
var cutText = []string{"Once upon a time, ", "there was a gateway ", "that counted tokens."}

const cutOutputTokens = (58 + 3) / 4

// How a fake provider's stream ends after the events it sends.
const (
	endAbort   = "abort"    // half an event, then the connection breaks
	endEOF     = "eof"      // half an event, then the body ends cleanly
	endWaitCtx = "wait-ctx" // nothing more; it waits for the client to leave
)

// cutEnd is how the stream asked for in body ends: the request's text
// names it.
func cutEnd(body []byte) string {
	for _, end := range []string{endAbort, endEOF, endWaitCtx} {
		if bytes.Contains(body, []byte("("+end+")")) {
			return end
		}
	}
	return endAbort
}

// finishCut writes half an event (the same for every format: a cut in
// the middle of its data line), then ends as end says.
func finishCut(w http.ResponseWriter, r *http.Request, half, end string) {
	fl := w.(http.Flusher)
	if end == endWaitCtx {
		<-r.Context().Done()
		return
	}
	_, _ = w.Write([]byte(half))
	fl.Flush()
	if end == endAbort {
		// net/http breaks the connection without the chunked body's end.
		panic(http.ErrAbortHandler)
	}
}

// anthropicCut streams Anthropic's events with the text of cutText, the
// message_start usage reporting 30 input tokens and 1 output token (as
// Anthropic does), and no message_delta: the stream ends as end says.
func anthropicCut(w http.ResponseWriter, r *http.Request, end string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	ev := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		fl.Flush()
	}
	ev("message_start", `{"type":"message_start","message":{"id":"msg_cut","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for _, part := range cutText {
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonQuote(part)+`}}`)
	}
	finishCut(w, r, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_de", end)
}

// chatCut streams chat completion chunks with the text of cutText and
// no usage chunk: the stream ends as end says.
func chatCut(w http.ResponseWriter, r *http.Request, end string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	for _, part := range cutText {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-cut\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", jsonQuote(part))
		fl.Flush()
	}
	finishCut(w, r, "data: {\"id\":\"chatcmpl-cut\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"conte", end)
}

// cutStreamCase is one road of TestStreamCutChargedDelivered.
type cutStreamCase struct {
	name string
	// path is the client's endpoint; messages says it speaks Anthropic's
	// API (else OpenAI's chat).
	path     string
	messages bool
	// anthropic says the target is Anthropic (else OpenAI).
	anthropic bool
	end       string
	// prompt is the input tokens charged: the provider's, or 0 for the
	// gateway's estimate of the body.
	prompt int64
}

// TestStreamCutChargedDelivered: a stream that ends before the provider
// reported its final usage, because the provider broke the connection in
// the middle of an event, ended its body there, or the client left, is
// charged the output it delivered: the input the provider reported (or
// the gateway's estimate of the body when it reported none), and the
// gateway's estimate of the delivered text (ceil(characters / 4)), not
// message_start's 1 output token. The log entry and the ledger record
// (fed from the same usage, as budget and rate-limit settlement are)
// agree and are marked estimated. Every road: native Messages, Messages
// translated to an OpenAI-format target, chat translated from an
// Anthropic target, and chat passed through. The client's official SDK
// stream reader parses every delivered event, then reports the
// gateway's error (TestStreamCutMidEventEndsCleanly checks that part
// alone).
func TestStreamCutChargedDelivered(t *testing.T) {
	cases := []cutStreamCase{
		{"native messages, provider breaks off", "/messages", true, true, endAbort, 30},
		{"native messages, body ends mid-event", "/messages", true, true, endEOF, 30},
		{"native messages, client leaves", "/messages", true, true, endWaitCtx, 30},
		{"messages translated, provider breaks off", "/messages", true, false, endAbort, 0},
		{"messages translated, body ends mid-event", "/messages", true, false, endEOF, 0},
		{"chat from anthropic, provider breaks off", "/chat/completions", false, true, endAbort, 30},
		{"chat from anthropic, client leaves", "/chat/completions", false, true, endWaitCtx, 30},
		{"chat passed through, provider breaks off", "/chat/completions", false, false, endAbort, 0},
		{"chat passed through, body ends mid-event", "/chat/completions", false, false, endEOF, 0},
	}
	ant := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) { anthropicCut(w, r, cutEnd(body)) })
	oai := newFakeOpenAI(t)
	oai.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		chatCut(w, r, cutEnd(body))
		return true
	}
	loadSite(t, site{LLM: fmt.Sprintf("ledger %q", filepath.Join(t.TempDir(), "ledger.db"))})
	reloadSafeTransport.CloseIdleConnections()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := uuid.NewString()
			target := openAITarget(oai, "gpt-4o-mini")
			if tc.anthropic {
				target = anthropicTarget(ant)
			}
			body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"tell me a story (` + tc.end + `)"}]}`
			if !tc.messages {
				body = `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"tell me a story (` + tc.end + `)"}]}`
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := streamRequest(t, ctx, tc.path, body, "x-gateway-config", target, "x-gateway-metadata", `{"run":"`+run+`"}`)
			defer resp.Body.Close()
			text, err := readCutStream(t, resp, tc.messages, tc.end == endWaitCtx, cancel)
			if text != strings.Join(cutText, "") {
				t.Fatalf("the SDK read %q before the stream ended (%v)", text, err)
			}
			if tc.end != endWaitCtx && (err == nil || !strings.Contains(err.Error(), "before it completed")) {
				t.Fatalf("the SDK's stream error is %v, want the gateway's error event", err)
			}
			wantPrompt := tc.prompt
			if wantPrompt == 0 {
				wantPrompt = (int64(len(body)) + 3) / 4
			}
			line := waitLogLine(t, resp.Header.Get("X-Gateway-Trace-Id"))
			for _, want := range []string{fmt.Sprintf(`"prompt_tokens":%d,`, wantPrompt), fmt.Sprintf(`"completion_tokens":%d,`, cutOutputTokens)} {
				if !strings.Contains(line, want) {
					t.Errorf("log entry lacks %s: %s", want, line)
				}
			}
			rec := waitLedgerRecord(t, run)
			if rec.Get("output_tokens").Int() != cutOutputTokens || rec.Get("input_tokens").Int() != wantPrompt || !rec.Get("estimated").Bool() {
				t.Errorf("ledger record %s, want %d input and %d output tokens, estimated", rec.Raw, wantPrompt, cutOutputTokens)
			}
		})
	}
}

// TestStreamCutMidEventEndsCleanly: a provider stream that breaks in the
// middle of an event ends, for the client, at the last complete event,
// followed by the gateway's error event on its own, in the API's stream
// format: Anthropic's event: error on /v1/messages (native and
// translated targets), data: {"error":…} on chat (passed through and
// translated from Anthropic). Nothing of the half event reaches the
// client, and the official SDKs' stream readers parse every event, then
// surface the error.
func TestStreamCutMidEventEndsCleanly(t *testing.T) {
	ant := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) { anthropicCut(w, r, cutEnd(body)) })
	oai := newFakeOpenAI(t)
	oai.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		chatCut(w, r, cutEnd(body))
		return true
	}
	loadProviderSite(t)
	for _, end := range []string{endAbort, endEOF} {
		for _, tc := range []struct {
			name           string
			path, target   string
			messages       bool
			wantErrorEvent string
		}{
			{"native messages", "/messages", anthropicTarget(ant), true, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","},
			{"messages translated", "/messages", openAITarget(oai, "gpt-4o-mini"), true, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","},
			{"chat from anthropic", "/chat/completions", anthropicTarget(ant), false, "data: {\"error\":{"},
			{"chat passed through", "/chat/completions", openAITarget(oai, "gpt-4o-mini"), false, "data: {\"error\":{"},
		} {
			t.Run(end+"/"+tc.name, func(t *testing.T) {
				body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"tell me a story (` + end + `)"}]}`
				// The raw stream: complete events, then the error event
				// alone at an event boundary.
				resp := streamRequest(t, context.Background(), tc.path, body, "x-gateway-config", tc.target)
				var raw bytes.Buffer
				_, _ = raw.ReadFrom(resp.Body)
				resp.Body.Close()
				s := raw.String()
				i := strings.Index(s, tc.wantErrorEvent)
				if i < 0 || (i > 0 && !strings.HasSuffix(s[:i], "\n\n")) || !strings.HasSuffix(s, "\n\n") {
					t.Fatalf("the error event is not alone after the last complete event:\n%s", s)
				}
				if strings.Contains(s, "text_de\"") || strings.Contains(s, `"conte"`) || strings.Contains(s, "text_deevent") || strings.Contains(s, "contedata") {
					t.Fatalf("the half event reached the client:\n%s", s)
				}
				// The SDK's reader.
				resp = streamRequest(t, context.Background(), tc.path, body, "x-gateway-config", tc.target)
				defer resp.Body.Close()
				text, err := readCutStream(t, resp, tc.messages, false, nil)
				if text != strings.Join(cutText, "") || err == nil || !strings.Contains(err.Error(), "before it completed") {
					t.Fatalf("the SDK read %q, then %v", text, err)
				}
			})
		}
	}
}

// streamRequest posts a streamed call to the gateway with the test key
// and returns the response, whose status must be 200.
func streamRequest(t *testing.T, ctx context.Context, path, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-gateway-api-key", gatewayKey)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := reloadSafeClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		t.Fatalf("status %d: %s", resp.StatusCode, b.String())
	}
	return resp
}

// readCutStream reads a stream with the official SDK's reader (Anthropic's
// for the Messages API, OpenAI's for chat) and returns its text and the
// reader's error. With leave, the client cancels (through cancel) once it
// read the whole of cutText.
func readCutStream(t *testing.T, resp *http.Response, messages, leave bool, cancel func()) (string, error) {
	t.Helper()
	var text strings.Builder
	want := strings.Join(cutText, "")
	if messages {
		st := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(resp), nil)
		for st.Next() {
			if ev := st.Current(); ev.Type == "content_block_delta" {
				text.WriteString(ev.Delta.Text)
			}
			if leave && text.String() == want {
				cancel()
				return text.String(), nil
			}
		}
		return text.String(), st.Err()
	}
	st := ossestream.NewStream[openai.ChatCompletionChunk](ossestream.NewDecoder(resp), nil)
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if leave && text.String() == want {
			cancel()
			return text.String(), nil
		}
	}
	return text.String(), st.Err()
}

// waitLogLine returns the gateway's log entry for a trace id, waiting
// for it: a stream's entry is written once the gateway finished with it,
// which may be after the client read its end.
func waitLogLine(t *testing.T, traceID string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range gatewayLogLines(t) {
			if strings.Contains(l, `"trace_id":"`+traceID+`"`) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log entry for trace %s", traceID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLedgerRecord returns the one ledger record of the request whose
// metadata run is run, waiting for it to be written.
func waitLedgerRecord(t *testing.T, run string) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		syncLedger(t)
		resp, raw := do(t, "GET", "/logs?metadata="+url.QueryEscape(`{"run":"`+run+`"}`), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("/logs: %d %s", resp.StatusCode, raw)
		}
		if recs := gjson.GetBytes(raw, "data").Array(); len(recs) == 1 {
			return recs[0]
		} else if len(recs) > 1 {
			t.Fatalf("%d ledger records of one request: %s", len(recs), raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ledger record of run %s", run)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// forbidden is the text the guardrail fakes answer, which the output
// guardrail of TestOutputGuardrailDenyEveryRoad forbids.
const forbidden = "the FORBIDDEN answer"

// forbiddenOpenAI answers chat completions, completions and the
// Responses API with forbidden, as JSON or a stream.
func forbiddenOpenAI(w http.ResponseWriter, r *http.Request, body []byte) bool {
	stream := gjson.GetBytes(body, "stream").Bool()
	fl := w.(http.Flusher)
	sse := func(event, data string) {
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
	}
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	switch r.URL.Path {
	case "/v1/chat/completions":
		if !stream {
			fmt.Fprintf(w, `{"id":"chatcmpl-f","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`, jsonQuote(forbidden))
			return true
		}
		for _, part := range strings.SplitAfter(forbidden, " ") {
			sse("", `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":`+jsonQuote(part)+`},"finish_reason":null}]}`)
		}
		sse("", `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
			sse("", `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
		}
		sse("", "[DONE]")
	case "/v1/completions":
		if !stream {
			fmt.Fprintf(w, `{"id":"cmpl-f","object":"text_completion","created":1,"model":"gpt-4o-mini","choices":[{"text":%s,"index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`, jsonQuote(forbidden))
			return true
		}
		for _, part := range strings.SplitAfter(forbidden, " ") {
			sse("", `{"id":"cmpl-f","object":"text_completion","created":1,"model":"gpt-4o-mini","choices":[{"text":`+jsonQuote(part)+`,"index":0,"logprobs":null,"finish_reason":null}]}`)
		}
		sse("", "[DONE]")
	case "/v1/responses":
		resp := `{"id":"resp_f","object":"response","created_at":1,"status":"completed","model":"gpt-4o-mini","output":[{"type":"message","id":"msg_f","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + jsonQuote(forbidden) + `,"annotations":[]}]}],"usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}`
		if !stream {
			fmt.Fprint(w, resp)
			return true
		}
		sse("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_f","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o-mini","output":[]}}`)
		sse("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_f","output_index":0,"content_index":0,"delta":`+jsonQuote(forbidden)+`}`)
		sse("response.completed", `{"type":"response.completed","sequence_number":2,"response":`+resp+`}`)
	default:
		return false
	}
	return true
}

// TestOutputGuardrailDenyEveryRoad: an output guardrail with deny
// withholds the answer on every answer path, whatever the client's API
// and whether the target speaks it or is translated: chat, completions,
// the Responses API (native and translated), the Messages API (native
// and translated), JSON and streamed. A JSON answer is a 446; a stream,
// held until the verdict as docs/guardrails.md says, is a 446 too. The
// 446 is in the API's error shape (Anthropic's on /v1/messages) and
// never carries the withheld text. Without the guardrail each road
// answers the text, so the fakes do serve it.
func TestOutputGuardrailDenyEveryRoad(t *testing.T) {
	oai := newFakeOpenAI(t)
	oai.Hook = forbiddenOpenAI
	ant := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		anthropicAnswer(w, gjson.GetBytes(body, "stream").Bool(), forbidden, false)
	})
	loadProviderSite(t)
	const guard = `"output_guardrails":[{"default.regexMatch":{"rule":"FORBIDDEN","not":true},"deny":true}],`
	chat := `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"say it"}]}`
	roads := []struct {
		name, path, target, body string
		anthropicShape           bool
	}{
		{"chat", "/chat/completions", openAITarget(oai, "gpt-4o-mini"), chat, false},
		{"completions", "/completions", openAITarget(oai, "gpt-4o-mini"), `{"model":"gpt-4o-mini","prompt":"say it","max_tokens":16}`, false},
		{"responses native", "/responses", openAITarget(oai, "gpt-4o-mini"), `{"model":"gpt-4o-mini","input":"say it","store":false}`, false},
		{"responses translated", "/responses", anthropicTarget(ant), `{"model":"claude-sonnet-4-5","input":"say it","store":false}`, false},
		{"messages native", "/messages", anthropicTarget(ant), `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"say it"}]}`, true},
		{"messages translated", "/messages", openAITarget(oai, "gpt-4o-mini"), `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"say it"}]}`, true},
	}
	for _, road := range roads {
		for _, stream := range []bool{false, true} {
			name := road.name + "/json"
			body := road.body
			if stream {
				name = road.name + "/stream"
				body = strings.Replace(body, `{`, `{"stream":true,`, 1)
			}
			t.Run(name, func(t *testing.T) {
				// Unguarded, the road answers the text.
				resp, raw := translatedDo(t, "POST", road.path, []byte(body), configHeader(road.target)...)
				if resp.StatusCode != 200 || !strings.Contains(string(raw), "FORBIDDEN") {
					t.Fatalf("unguarded: %d %s", resp.StatusCode, raw)
				}
				guarded := strings.Replace(road.target, `{`, `{`+guard, 1)
				resp, raw = translatedDo(t, "POST", road.path, []byte(body), configHeader(guarded)...)
				if resp.StatusCode != 446 || strings.Contains(string(raw), "FORBIDDEN") {
					t.Fatalf("guarded: %d %s", resp.StatusCode, raw)
				}
				if road.anthropicShape {
					if typ, _ := anthropicError(t, raw); typ == "" || !gjson.GetBytes(raw, "hook_results.after_request_hooks.0").Exists() {
						t.Fatalf("guarded: %s", raw)
					}
				} else if gjson.GetBytes(raw, "error.type").String() != "hooks_failed" || !gjson.GetBytes(raw, "hook_results.after_request_hooks.0").Exists() {
					t.Fatalf("guarded: %s", raw)
				}
			})
		}
	}
}

// TestInputGuardrailDenyEveryRoad: an input guardrail with deny refuses
// the request on every road before any provider is called, a translated
// call included: its checks read the chat completion its target would be
// sent (the conversation's last message), not the client's format, so a
// Responses call to a chat target is judged on its input as a native one
// is. The 446 is in the API's error shape.
func TestInputGuardrailDenyEveryRoad(t *testing.T) {
	oai := newFakeOpenAI(t)
	oai.Hook = forbiddenOpenAI
	ant := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		anthropicAnswer(w, gjson.GetBytes(body, "stream").Bool(), "fine", false)
	})
	loadProviderSite(t)
	const guard = `"input_guardrails":[{"default.regexMatch":{"rule":"SECRET","not":true},"deny":true}],`
	roads := []struct {
		name, path, target, body string
		anthropicShape           bool
	}{
		{"chat", "/chat/completions", openAITarget(oai, "gpt-4o-mini"), `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"tell the SECRET"}]}`, false},
		{"completions", "/completions", openAITarget(oai, "gpt-4o-mini"), `{"model":"gpt-4o-mini","prompt":"tell the SECRET"}`, false},
		{"responses native", "/responses", openAITarget(oai, "gpt-4o-mini"), `{"model":"gpt-4o-mini","input":"tell the SECRET","store":false}`, false},
		{"responses translated", "/responses", anthropicTarget(ant), `{"model":"claude-sonnet-4-5","input":"tell the SECRET","store":false}`, false},
		{"responses translated, input items", "/responses", anthropicTarget(ant), `{"model":"claude-sonnet-4-5","input":[{"role":"user","content":"tell the SECRET"}],"store":false}`, false},
		{"messages native", "/messages", anthropicTarget(ant), `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"tell the SECRET"}]}`, true},
		{"messages translated", "/messages", openAITarget(oai, "gpt-4o-mini"), `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"tell the SECRET"}]}`, true},
	}
	for _, road := range roads {
		for _, stream := range []bool{false, true} {
			name, body := road.name+"/json", road.body
			if stream {
				name, body = road.name+"/stream", strings.Replace(body, `{`, `{"stream":true,`, 1)
			}
			t.Run(name, func(t *testing.T) {
				before := oai.count() + len(ant.seen)
				resp, raw := translatedDo(t, "POST", road.path, []byte(body), configHeader(strings.Replace(road.target, `{`, `{`+guard, 1))...)
				if resp.StatusCode != 446 || oai.count()+len(ant.seen) != before {
					t.Fatalf("%d, provider called %d times: %s", resp.StatusCode, oai.count()+len(ant.seen)-before, raw)
				}
				if road.anthropicShape {
					if typ, _ := anthropicError(t, raw); typ == "" {
						t.Fatalf("%s", raw)
					}
				} else if gjson.GetBytes(raw, "error.type").String() != "hooks_failed" {
					t.Fatalf("%s", raw)
				}
			})
		}
	}
}
