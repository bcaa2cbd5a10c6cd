package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/realtime"
	"github.com/tidwall/gjson"
)

// realtimeProviderKey is the provider key the gateway's virtual key
// holds; clients never see it.
const realtimeProviderKey = "sk-upstream-realtime-secret"

// realtimeSite is a gateway with a virtual key "vk-rt" for up, a ledger
// in dir, and the realtime block given.
func realtimeSite(t *testing.T, up *fakeRealtime, block string) site {
	return site{
		LLM: fmt.Sprintf("virtual_key vk-rt {\n\t\t\tprovider openai\n\t\t\tapi_key %s\n\t\t\tcustom_host %s/v1\n\t\t}\n\t\tledger %q",
			realtimeProviderKey, up.URL, filepath.Join(t.TempDir(), "ledger.db")),
		Gateway: "custom_host_allow loopback\n\t\t\trealtime {\n" + block + "\n\t\t\t}",
	}
}

// wsURL is the gateway's realtime URL.
func wsURL(model string) string {
	return strings.Replace(gatewayURL(), "http://", "ws://", 1) + "/realtime?model=" + model
}

// recvUntil reads raw events from conn until one of type want; it
// returns every event's type and the events themselves.
func recvUntil(t *testing.T, ctx context.Context, recv func(context.Context) (json.RawMessage, error), want string) ([]string, []json.RawMessage) {
	t.Helper()
	var types []string
	var evs []json.RawMessage
	for {
		ev, err := recv(ctx)
		if err != nil {
			t.Fatalf("waiting for %s after %v: %v", want, types, err)
		}
		typ := gjson.GetBytes(ev, "type").Str
		types, evs = append(types, typ), append(evs, ev)
		if typ == want {
			return types, evs
		}
	}
}

// TestRealtimeSDKSession opens a session with openai-go's realtime
// client (gateway key as its API key, a virtual key header), runs two
// responses, and checks: the events arrive in the provider's order
// (text and audio deltas interleaved), the provider got the virtual
// key's credential and no gateway key, the ledger holds one record per
// response with the events' usage and a catalog cost, and the socket's
// log line carries the session's totals.
func TestRealtimeSDKSession(t *testing.T) {
	up := newFakeRealtime(t)
	loadSite(t, realtimeSite(t, up, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(gatewayKey),
		option.WithHeader("x-gateway-virtual-key", "vk-rt"))
	conn, err := client.Realtime.Connect(ctx, realtime.RealtimeConnectionOptions{}, option.WithQuery("model", "gpt-realtime"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Abort()
	types, _ := recvUntil(t, ctx, conn.RecvRaw, "session.created")
	if len(types) != 1 {
		t.Fatalf("first events %v, want session.created", types)
	}
	for resp := 1; resp <= 2; resp++ {
		if err := conn.SendRaw(ctx, json.RawMessage(`{"type":"response.create","response":{"output_modalities":["audio"]}}`)); err != nil {
			t.Fatal(err)
		}
		types, evs := recvUntil(t, ctx, conn.RecvRaw, "response.done")
		want := []string{"response.created"}
		for i := 0; i < up.deltas; i++ {
			want = append(want, "response.output_text.delta", "response.output_audio.delta")
		}
		want = append(want, "response.done")
		if strings.Join(types, ",") != strings.Join(want, ",") {
			t.Fatalf("response %d: events %v, want %v", resp, types, want)
		}
		for i := 0; i < up.deltas; i++ {
			if got := gjson.GetBytes(evs[1+2*i], "delta").Str; got != fmt.Sprintf("t%d", i) {
				t.Errorf("response %d: text delta %d is %q", resp, i, got)
			}
		}
	}
	if err := conn.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	for _, a := range up.authSeen() {
		if a != "Bearer "+realtimeProviderKey {
			t.Errorf("the provider got Authorization %q, want the virtual key's", a)
		}
	}
	for _, h := range up.headers {
		for k, v := range h {
			if strings.Contains(strings.Join(v, " "), gatewayKey) || strings.HasPrefix(strings.ToLower(k), "x-gateway") {
				t.Errorf("the provider got the gateway's header %s: %v", k, v)
			}
		}
	}
	// One log line for the socket, with its totals.
	line := socketLogLine(t, `"realtime":{`)
	if gjson.Get(line, "realtime.responses").Int() != 2 || gjson.Get(line, "realtime.input_tokens").Int() != 200 ||
		gjson.Get(line, "realtime.output_audio_tokens").Int() != 80 || gjson.Get(line, "status").Int() != 101 {
		t.Errorf("socket log line: %s", line)
	}
	if strings.Contains(readLog(t), realtimeProviderKey) {
		t.Error("the provider key is in the log")
	}
	syncLedger(t)
	var logs struct {
		Total int64
		Data  []struct {
			Operation string `json:"operation"`
			Model     string `json:"model"`
			Input     int64  `json:"input_tokens"`
			Output    int64  `json:"output_tokens"`
			Cached    int64  `json:"cached_tokens"`
			CostNano  int64  `json:"cost_nano_usd"`
			Known     bool   `json:"cost_known"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100", gatewayKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	if logs.Total != 2 {
		t.Fatalf("%d ledger records, want one per response (2): %+v", logs.Total, logs.Data)
	}
	for _, l := range logs.Data {
		if l.Operation != "realtime" || l.Model != "gpt-realtime" || l.Input != 100 || l.Output != 50 || l.Cached != 20 || !l.Known || l.CostNano <= 0 {
			t.Errorf("ledger record %+v, want the events' usage (100 in, 50 out, 20 cached) priced", l)
		}
	}
}

// TestRealtimeBrowserKey opens sessions the way a browser must, the key
// in the subprotocol: the session opens with "realtime" negotiated and
// the provider sees neither the key nor its subprotocol; a wrong key is
// a 401 before any upgrade, and the provider is never dialled.
func TestRealtimeBrowserKey(t *testing.T) {
	up := newFakeRealtime(t)
	loadSite(t, realtimeSite(t, up, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hdr := http.Header{"X-Gateway-Virtual-Key": {"vk-rt"}}
	c, resp, err := websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key." + gatewayKey}, HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if c.Subprotocol() != "realtime" {
		t.Errorf("negotiated %q, want realtime", c.Subprotocol())
	}
	if resp.Header.Get("x-gateway-trace-id") == "" {
		t.Errorf("upgrade answer without the trace id: %v", resp.Header)
	}
	if _, msg, err := c.Read(ctx); err != nil || gjson.GetBytes(msg, "type").Str != "session.created" {
		t.Fatalf("first event %s, %v", msg, err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	for _, h := range up.headers {
		if p := h.Get("Sec-Websocket-Protocol"); strings.Contains(p, gatewayKey) || strings.Contains(p, "insecure") {
			t.Errorf("the provider got the subprotocol %q", p)
		}
	}
	before := up.sessions.Load()
	_, resp, err = websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key.wrong-key"}, HTTPHeader: hdr})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: %v %v, want 401", resp, err)
	}
	if up.sessions.Load() != before {
		t.Error("the provider was dialled for a refused key")
	}
}

// TestRealtimeBounds: the egress policy holds on a client-given host
// (refused before any dial), a key's socket bound answers 429, and a
// model the key may not use is refused.
func TestRealtimeBounds(t *testing.T) {
	up := newFakeRealtime(t)
	s := realtimeSite(t, up, "\t\t\t\tmax_sockets_per_key 1")
	s.Gateway = strings.Replace(s.Gateway, "custom_host_allow loopback", "", 1)
	loadSite(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(h http.Header) (*websocket.Conn, *http.Response, error) {
		h.Set("Authorization", "Bearer "+gatewayKey)
		return websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{HTTPHeader: h})
	}
	// A custom host from the client is checked against the policy,
	// which does not allow loopback here.
	_, resp, err := dial(http.Header{"X-Gateway-Provider": {"openai"}, "X-Gateway-Custom-Host": {up.URL + "/v1"}, "X-Gateway-Api-Key": {gatewayKey}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest || up.sessions.Load() != 0 {
		t.Fatalf("guarded host: %v %v, %d sessions; want 400 and no dial", resp, err, up.sessions.Load())
	}
	c, _, err := dial(http.Header{"X-Gateway-Virtual-Key": {"vk-rt"}})
	if err != nil {
		t.Fatalf("first socket: %v", err)
	}
	defer c.CloseNow()
	_, resp, err = dial(http.Header{"X-Gateway-Virtual-Key": {"vk-rt"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second socket of the key: %v %v, want 429", resp, err)
	}
}

// TestRealtimeBudgetExhausted spends a token usage limit inside one
// session (llm_ratelimit in front): the responses within it pass, the
// one after it is refused with an error event budget_exceeded and the
// close code 1008, and the ledger holds exactly the responses billed.
func TestRealtimeBudgetExhausted(t *testing.T) {
	up := newFakeRealtime(t)
	vk := fmt.Sprintf("virtual_key vk-rt {\n\t\t\tprovider openai\n\t\t\tapi_key %s\n\t\t\tcustom_host %s/v1\n\t\t}\n\t\tledger %q",
		realtimeProviderKey, up.URL, filepath.Join(t.TempDir(), "ledger.db"))
	loadRL(t, rlSite{Redis: vk})
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{
		"name": "rt", "type": "tokens", "credit_limit": 200, "periodic_reset": "monthly",
		"conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}]}`)
	if status != 200 {
		t.Fatalf("create usage limit: %d %v", status, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + gatewayKey}, "X-Gateway-Virtual-Key": {"vk-rt"}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	recv := func(ctx context.Context) (json.RawMessage, error) {
		_, m, err := c.Read(ctx)
		return m, err
	}
	recvUntil(t, ctx, recv, "session.created")
	// 150 tokens each: the first two pass (0 and 150 spent of 200 when
	// they start), the third finds the limit spent.
	for i := 0; i < 2; i++ {
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
			t.Fatal(err)
		}
		recvUntil(t, ctx, recv, "response.done")
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
		t.Fatal(err)
	}
	_, evs := recvUntil(t, ctx, recv, "error")
	ev := evs[len(evs)-1]
	if gjson.GetBytes(ev, "error.code").Str != "budget_exceeded" || gjson.GetBytes(ev, "error.message").Str == "" {
		t.Errorf("error event %s, want budget_exceeded", ev)
	}
	for _, e := range evs {
		if gjson.GetBytes(e, "type").Str == "response.output_text.delta" {
			t.Errorf("a refused response's deltas reached the client: %s", e)
		}
	}
	_, _, err = c.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
		t.Errorf("closed with %v (%v), want 1008", code, err)
	}
	syncLedger(t)
	var logs struct{ Total int64 }
	if code := getJSON(t, "/logs?page_size=100", gatewayKey, &logs); code != 200 || logs.Total != 2 {
		t.Errorf("ledger: %d, %d records; want the 2 responses billed", code, logs.Total)
	}
}

// TestRealtimeClientNeverReads: a provider floods a client that reads
// nothing. The gateway holds back (it reads the next message only once
// the last was written), then closes the session after its write
// timeout; the provider's writes stop with a bounded amount sent, and
// the process's heap does not grow by what it tried to send.
func TestRealtimeClientNeverReads(t *testing.T) {
	up := newFakeRealtime(t)
	up.flood = 256 << 10
	loadSite(t, realtimeSite(t, up, "\t\t\t\twrite_timeout 500ms"))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + gatewayKey}, "X-Gateway-Virtual-Key": {"vk-rt"}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	select {
	case <-up.closed:
	case <-ctx.Done():
		t.Fatalf("the provider was still writing after %d bytes: the session was not closed", up.written.Load())
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	sent := up.written.Load()
	// What the provider got out before the gateway stopped reading is
	// socket buffers (kernel and library) plus one message in flight.
	if sent > 64<<20 {
		t.Errorf("the provider wrote %d bytes to a client that reads nothing", sent)
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d bytes", grew)
	}
	realtimeWait(t, "the socket's log line", func() bool {
		for _, l := range gatewayLogLines(t) {
			if gjson.Get(l, "realtime.close_cause").Str == "slow_client" {
				return true
			}
		}
		return false
	})
}

// TestRealtimeReloadCloseDelay: a reload keeps open sessions until the
// configured close delay, then ends them with 1001.
func TestRealtimeReloadCloseDelay(t *testing.T) {
	up := newFakeRealtime(t)
	loadSite(t, realtimeSite(t, up, "\t\t\t\tclose_delay 200ms"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + gatewayKey}, "X-Gateway-Virtual-Key": {"vk-rt"}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	loadSite(t, realtimeSite(t, up, ""))
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway {
		t.Errorf("after the reload's close delay: %v, want 1001", err)
	}
}

// TestRealtimeKeyRevoked: a key revoked while its Realtime session is
// open is refused at the session's next response (the key is
// authenticated again as each response is reserved): an error event
// with the API's 401 code and close 1008.
func TestRealtimeKeyRevoked(t *testing.T) {
	up := newFakeRealtime(t)
	newKeysSite(t, fmt.Sprintf("virtual_key vk-rt {\n\t\t\tprovider openai\n\t\t\tapi_key %s\n\t\t\tcustom_host %s/v1\n\t\t}",
		realtimeProviderKey, up.URL)).load(t)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"rt-revoked","scopes":["completions.write"]}`, 200, &created)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL("gpt-realtime"), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + created.Key}, "X-Gateway-Virtual-Key": {"vk-rt"}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	recv := func(ctx context.Context) (json.RawMessage, error) {
		_, m, err := c.Read(ctx)
		return m, err
	}
	recvUntil(t, ctx, recv, "session.created")
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, ctx, recv, "response.done")

	as(t, keysAdminKey, "DELETE", "/api-keys/"+created.ID, "", 200, nil)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
		t.Fatal(err)
	}
	_, evs := recvUntil(t, ctx, recv, "error")
	if ev := evs[len(evs)-1]; gjson.GetBytes(ev, "error.code").Str != "api_key_revoked" {
		t.Errorf("error event %s, want api_key_revoked", ev)
	}
	for _, e := range evs {
		if gjson.GetBytes(e, "type").Str == "response.output_text.delta" {
			t.Errorf("the revoked key's response reached the client: %s", e)
		}
	}
	_, _, err = c.Read(ctx)
	if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
		t.Errorf("closed with %v (%v), want 1008", code, err)
	}
}
