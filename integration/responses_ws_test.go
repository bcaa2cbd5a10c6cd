package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// responsesWSURL is the gateway's Responses WebSocket URL.
func responsesWSURL() string {
	return strings.Replace(gatewayURL(), "http://", "ws://", 1) + "/responses"
}

// wsCreate is a response.create for the Anthropic fake: input as one
// user turn, continuing prev when set.
func wsCreate(input, prev string) responses.ResponsesClientEventResponseCreateParam {
	p := responses.ResponsesClientEventResponseCreateParam{
		Model: "claude-sonnet-4-5",
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(input)},
	}
	if prev != "" {
		p.PreviousResponseID = openai.String(prev)
	}
	return p
}

// TestResponsesWebSocketSDK runs a three-turn session on one socket with
// openai-go's Responses WebSocket client (client.Responses.Connect),
// translated to an Anthropic Messages target, each turn continuing the
// last with previous_response_id. It checks: the usual Responses events
// in order, the history replayed to the provider turn by turn (the
// fake answers with the number of messages it got), the responses
// stored and retrievable over HTTP, one ledger record per response with
// exactly the usage the events reported, one log line for the socket,
// and that a malformed message gets an error event without ending the
// socket.
func TestResponsesWebSocketSDK(t *testing.T) {
	up := responsesAnthropic(t)
	loadSite(t, site{LLM: fmt.Sprintf("ledger %q", filepath.Join(t.TempDir(), "ledger.db"))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(anthropicKey),
		option.WithHeader("x-gateway-api-key", gatewayKey), option.WithHeader("x-gateway-provider", "anthropic"),
		option.WithHeader("x-gateway-custom-host", up.URL))
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Abort()

	// Turn 1, read event by event.
	first := wsCreate("hello", "")
	first.Instructions = openai.String("Be brief.")
	if err := conn.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	types, evs := recvUntil(t, ctx, conn.RecvRaw, "response.completed")
	if types[0] != "response.created" || !strings.Contains(strings.Join(types, ","), "response.output_text.delta") {
		t.Fatalf("turn 1 events %v", types)
	}
	var text string
	for _, ev := range evs {
		if gjson.GetBytes(ev, "type").Str == "response.output_text.delta" {
			text += gjson.GetBytes(ev, "delta").Str
		}
	}
	done := evs[len(evs)-1]
	id := gjson.GetBytes(done, "response.id").Str
	if text != "seen 2 messages" || gjson.GetBytes(done, "response.status").Str != "completed" || id == "" {
		t.Fatalf("turn 1: text %q, final %s", text, done)
	}
	usage := []gjson.Result{gjson.GetBytes(done, "response.usage")}

	// A message the gateway cannot read: an error event, the socket
	// goes on.
	if err := conn.SendRaw(ctx, json.RawMessage(`{"type":"response.create","model":"a","model":"b","input":"x"}`)); err != nil {
		t.Fatal(err)
	}
	_, bad := recvUntil(t, ctx, conn.RecvRaw, "error")
	if ev := bad[len(bad)-1]; gjson.GetBytes(ev, "error.code").Str != "invalid_message" || gjson.GetBytes(ev, "status").Int() != 400 {
		t.Errorf("error event %s, want invalid_message, status 400", ev)
	}

	// Turns 2 and 3 through the SDK's FinalResponse.
	want := []string{"seen 3 messages", "seen 5 messages"} // the history replayed, the instructions not
	for i, input := range []string{"and again", "once more"} {
		if err := conn.Create(ctx, wsCreate(input, id)); err != nil {
			t.Fatal(err)
		}
		resp, err := conn.FinalResponse(ctx)
		if err != nil {
			t.Fatalf("turn %d: %v", i+2, err)
		}
		if resp.OutputText() != want[i] || resp.PreviousResponseID != id {
			t.Fatalf("turn %d: %s", i+2, resp.RawJSON())
		}
		id = resp.ID
		usage = append(usage, gjson.Get(resp.RawJSON(), "usage"))
	}
	if gjson.GetBytes(up.last().Body, "system").Exists() {
		t.Error("the instructions were inherited by a later turn")
	}
	if err := conn.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// The last response is stored, for HTTP calls too.
	http := responsesClient("anthropic", up.URL)
	got, err := http.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "seen 5 messages" {
		t.Fatalf("GET the stored response: %v %v", got, err)
	}

	line := socketLogLine(t, `"responses_websocket":{`)
	if gjson.Get(line, "responses_websocket.responses").Int() != 3 || gjson.Get(line, "status").Int() != 101 ||
		gjson.Get(line, "responses_websocket.input_tokens").Int() == 0 {
		t.Errorf("socket log line: %s", line)
	}
	syncLedger(t)
	var logs struct {
		Total int64
		Data  []struct {
			Operation string `json:"operation"`
			Provider  string `json:"provider"`
			Input     int64  `json:"input_tokens"`
			Output    int64  `json:"output_tokens"`
			Cached    int64  `json:"cached_tokens"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100", gatewayKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	// Newest first: the HTTP GET (no provider), then the three
	// responses; the socket itself has no record.
	if logs.Total != 4 || logs.Data[0].Provider != "" {
		t.Fatalf("%d ledger records, want the GET and one per response (3): %+v", logs.Total, logs.Data)
	}
	for i, l := range logs.Data[1:] {
		u := usage[2-i]
		if l.Operation != "responses" || l.Provider != "anthropic" || l.Input != u.Get("input_tokens").Int() ||
			l.Output != u.Get("output_tokens").Int() || l.Cached != u.Get("input_tokens_details.cached_tokens").Int() || l.Input == 0 {
			t.Errorf("ledger record %d %+v, want the events' usage %s", i, l, u.Raw)
		}
	}
}

// TestResponsesWebSocketBudget spends a token usage limit (llm_ratelimit
// in front) on one socket: the responses before it pass, the next is
// refused with an error event budget_exceeded (status 412) before any
// provider call, and the socket closes with 1008; the ledger holds the
// responses billed.
func TestResponsesWebSocketBudget(t *testing.T) {
	up := responsesAnthropic(t)
	loadRL(t, rlSite{Redis: fmt.Sprintf("ledger %q", filepath.Join(t.TempDir(), "ledger.db"))})
	// 32 tokens a response (21 in, 7 out, 4 cached read): two pass (0
	// and 32 spent of 50 when they start), the third finds it spent.
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{
		"name": "rws", "type": "tokens", "credit_limit": 50, "periodic_reset": "monthly",
		"conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}]}`)
	if status != 200 {
		t.Fatalf("create usage limit: %d %v", status, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, responsesWSURL(), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + anthropicKey}, "X-Gateway-Api-Key": {gatewayKey},
		"X-Gateway-Provider": {"anthropic"}, "X-Gateway-Custom-Host": {up.URL}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	recv := func(ctx context.Context) (json.RawMessage, error) {
		_, m, err := c.Read(ctx)
		return m, err
	}
	create := []byte(`{"type":"response.create","model":"claude-sonnet-4-5","input":"hello","stream_id":"lane-1"}`)
	for i := 0; i < 2; i++ {
		if err := c.Write(ctx, websocket.MessageText, create); err != nil {
			t.Fatal(err)
		}
		_, evs := recvUntil(t, ctx, recv, "response.completed")
		for _, ev := range evs {
			if gjson.GetBytes(ev, "stream_id").Str != "lane-1" {
				t.Fatalf("event without its stream_id: %s", ev)
			}
		}
	}
	seen := func() int { up.mu.Lock(); defer up.mu.Unlock(); return len(up.seen) }
	calls := seen()
	if err := c.Write(ctx, websocket.MessageText, create); err != nil {
		t.Fatal(err)
	}
	_, evs := recvUntil(t, ctx, recv, "error")
	ev := evs[len(evs)-1]
	if len(evs) != 1 || gjson.GetBytes(ev, "error.code").Str != "budget_exceeded" || gjson.GetBytes(ev, "status").Int() != 412 ||
		gjson.GetBytes(ev, "stream_id").Str != "lane-1" {
		t.Errorf("events %v, want one error event budget_exceeded, status 412, on lane-1", evs)
	}
	_, _, err = c.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
		t.Errorf("closed with %v (%v), want 1008", code, err)
	}
	if seen() != calls {
		t.Error("the refused response reached the provider")
	}
	syncLedger(t)
	var logs struct{ Total int64 }
	if code := getJSON(t, "/logs?page_size=100", gatewayKey, &logs); code != 200 || logs.Total != 2 {
		t.Errorf("ledger: %d, %d records; want the 2 responses billed", code, logs.Total)
	}
}

// TestResponsesWebSocketNpmClient runs the openai npm package's Responses
// WebSocket client (ResponsesWS, Node) for three turns with
// previous_response_id through the gateway to the Anthropic fake, and
// checks what it saw: the deltas making up each answer, the history
// replayed turn by turn, each turn continuing the last, and usage.
func TestResponsesWebSocketNpmClient(t *testing.T) {
	up := responsesAnthropic(t)
	loadSite(t, site{})
	out := runNode(t, "responses_ws.mjs", "GATEWAY_URL="+gatewayURL(), "GATEWAY_KEY="+gatewayKey,
		"PROVIDER_KEY="+anthropicKey, "PROVIDER=anthropic", "CUSTOM_HOST="+up.URL)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"seen 1 messages", "seen 3 messages", "seen 5 messages"}
	if len(lines) != len(want) {
		t.Fatalf("node printed %q, want a line per turn", out)
	}
	prev := ""
	for i, l := range lines {
		r := gjson.Parse(l)
		if r.Get("text").Str != want[i] || r.Get("deltas").Str != want[i] || r.Get("id").Str == "" ||
			r.Get("previous_response_id").Str != prev || r.Get("usage.input_tokens").Int() == 0 {
			t.Errorf("turn %d: %s", i+1, l)
		}
		prev = r.Get("id").Str
	}
}

// TestResponsesWebSocketKeyRevoked: a key revoked while its Responses
// WebSocket is open is refused at the socket's next response.create
// (the key is authenticated again before each response): one error
// event with the API's 401 code, close 1008, no provider call.
func TestResponsesWebSocketKeyRevoked(t *testing.T) {
	up := responsesAnthropic(t)
	newKeysSite(t, "").load(t)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"ws-revoked","scopes":["completions.write"]}`, 200, &created)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, responsesWSURL(), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + anthropicKey}, "X-Gateway-Api-Key": {created.Key},
		"X-Gateway-Provider": {"anthropic"}, "X-Gateway-Custom-Host": {up.URL}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	recv := func(ctx context.Context) (json.RawMessage, error) {
		_, m, err := c.Read(ctx)
		return m, err
	}
	create := []byte(`{"type":"response.create","model":"claude-sonnet-4-5","input":"hello"}`)
	if err := c.Write(ctx, websocket.MessageText, create); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, ctx, recv, "response.completed")
	seen := func() int { up.mu.Lock(); defer up.mu.Unlock(); return len(up.seen) }
	calls := seen()

	as(t, keysAdminKey, "DELETE", "/api-keys/"+created.ID, "", 200, nil)
	if err := c.Write(ctx, websocket.MessageText, create); err != nil {
		t.Fatal(err)
	}
	_, evs := recvUntil(t, ctx, recv, "error")
	ev := evs[len(evs)-1]
	if len(evs) != 1 || gjson.GetBytes(ev, "error.code").Str != "api_key_revoked" || gjson.GetBytes(ev, "status").Int() != 401 {
		t.Errorf("events %v, want one error event api_key_revoked, status 401", evs)
	}
	_, _, err = c.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
		t.Errorf("closed with %v (%v), want 1008", code, err)
	}
	if seen() != calls {
		t.Error("the revoked key's response reached the provider")
	}
}
