package mcp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestReadAnswer(t *testing.T) {
	const id = `"llmgw-7"`
	tests := []struct {
		name      string
		in        string
		result    string
		toolError bool
		code      int64 // a server's JSON-RPC error
		wantErr   string
	}{
		{name: "result", in: `{"jsonrpc":"2.0","id":"llmgw-7","result":{"content":[]}}`, result: `{"content":[]}`},
		{name: "tool error", in: `{"jsonrpc":"2.0","id":"llmgw-7","result":{"content":[],"isError":true}}`, result: `{"content":[],"isError":true}`, toolError: true},
		{name: "server error", in: `{"jsonrpc":"2.0","id":"llmgw-7","error":{"code":-32601,"message":"no"}}`, code: -32601},
		{name: "another id", in: `{"jsonrpc":"2.0","id":"llmgw-8","result":{}}`, wantErr: "not the call's response"},
		{name: "a notification", in: `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, wantErr: "not the call's response"},
		{name: "member twice", in: `{"jsonrpc":"2.0","id":"llmgw-7","result":{},"result":{"x":1}}`, wantErr: "not one JSON-RPC object"},
		{name: "not JSON", in: `{"jsonrpc":`, wantErr: "not one JSON-RPC object"},
		{name: "a batch", in: `[{"jsonrpc":"2.0","id":"llmgw-7","result":{}}]`, wantErr: "not one JSON-RPC object"},
		{name: "result not an object", in: `{"jsonrpc":"2.0","id":"llmgw-7","result":"x"}`, wantErr: "no result"},
		{name: "malformed error", in: `{"jsonrpc":"2.0","id":"llmgw-7","error":{"code":"x"}}`, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, toolError, err := readAnswer([]byte(tt.in), id)
			var werr *jsonrpc.Error
			switch {
			case tt.code != 0:
				if !errors.As(err, &werr) || werr.Code != tt.code {
					t.Fatalf("err %v, want code %d", err, tt.code)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			default:
				if err != nil || string(res) != tt.result || toolError != tt.toolError {
					t.Fatalf("%s %v %v", res, toolError, err)
				}
			}
		})
	}
}

func TestReadStream(t *testing.T) {
	const id = `"llmgw-1"`
	tests := []struct {
		name, in, result, wantErr string
	}{
		{name: "the response after others", in: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
			"id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"llmgw-1\",\ndata: \"result\":{\"a\":1}}\n\n", result: `{"a":1}`},
		{name: "no final blank line", in: "data: {\"jsonrpc\":\"2.0\",\"id\":\"llmgw-1\",\"result\":{}}", result: `{}`},
		{name: "ended early", in: "data: {\"jsonrpc\":\"2.0\",\"id\":\"llmgw-9\",\"result\":{}}\n\n", wantErr: "ended before"},
		{name: "an event too large", in: "data: " + strings.Repeat("x", maxEventSize+1) + "\n\n", wantErr: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _, err := readStream(strings.NewReader(tt.in), id)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(res) != tt.result {
				t.Fatalf("%s %v", res, err)
			}
		})
	}
}

func TestCallBody(t *testing.T) {
	p := &sdk.CallToolParamsRaw{Arguments: json.RawMessage(`{"n":1}`), RequestState: "st"}
	meta := map[string]any{"traceparent": "00-1-2-01"}
	old, err := callBody(`"llmgw-1"`, "read", p, meta, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":"llmgw-1","method":"tools/call","params":{"_meta":{"traceparent":"00-1-2-01"},"name":"read","arguments":{"n":1},"requestState":"st"}}`; string(old) != want {
		t.Fatalf("2025-11-25 body\n%s\nwant\n%s", old, want)
	}
	cur, err := callBody(`"llmgw-2"`, "read", &sdk.CallToolParamsRaw{}, nil, newProtocol)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Params struct {
			Meta      map[string]json.RawMessage `json:"_meta"`
			Arguments json.RawMessage            `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(cur, &m); err != nil {
		t.Fatal(err)
	}
	if string(m.Params.Arguments) != "{}" || string(m.Params.Meta[sdk.MetaKeyProtocolVersion]) != `"`+newProtocol+`"` ||
		string(m.Params.Meta[sdk.MetaKeyClientCapabilities]) != "{}" || len(m.Params.Meta[sdk.MetaKeyClientInfo]) == 0 {
		t.Fatalf("%s body %s", newProtocol, cur)
	}
	if len(meta) != 1 {
		t.Fatalf("the caller's meta map was changed: %v", meta)
	}
}

func TestDirectCall(t *testing.T) {
	msg := func(params string) *message {
		return &message{method: methodCallTool, name: "files__read", id: []byte("1"),
			body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`)}
	}
	hdr := func(kv ...string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "http://x/mcp", nil)
		r.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		return r
	}
	tests := []struct {
		name   string
		r      *http.Request
		params string
		direct bool
		args   string
	}{
		{"plain", hdr(), `{"name":"files__read","arguments":{"a":1}}`, true, `{"a":1}`},
		{"no arguments", hdr(), `{"name":"files__read"}`, true, ""},
		{"null arguments", hdr(), `{"name":"files__read","arguments":null}`, true, ""},
		{"the caller's _meta is dropped", hdr(), `{"name":"files__read","_meta":{"x":1}}`, true, ""},
		{"progress asked for", hdr(), `{"name":"files__read","_meta":{"progressToken":"p"}}`, false, ""},
		{"arguments not an object", hdr(), `{"name":"files__read","arguments":[1]}`, false, ""},
		{"no JSON accepted", hdr("Accept", "text/event-stream"), `{"name":"files__read"}`, false, ""},
		{"unknown protocol version", hdr("Mcp-Protocol-Version", "1999-01-01"), `{"name":"files__read"}`, false, ""},
		{"a known protocol version", hdr("Mcp-Protocol-Version", "2025-11-25"), `{"name":"files__read"}`, true, ""},
		{"Mcp-Name contradicts the body", hdr("Mcp-Name", "files__write"), `{"name":"files__read"}`, false, ""},
		{"Mcp-Method contradicts the body", hdr("Mcp-Method", "prompts/get"), `{"name":"files__read"}`, false, ""},
		{"a parameter header", hdr("Mcp-Param-Path", "x"), `{"name":"files__read"}`, false, ""},
		{"request state not a string", hdr(), `{"name":"files__read","requestState":1}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := directCall(tt.r, msg(tt.params))
			if ok != tt.direct {
				t.Fatalf("direct %v, want %v", ok, tt.direct)
			}
			if ok && (string(p.Arguments) != tt.args || p.Name != "files__read" || p.Meta != nil) {
				t.Fatalf("params %+v", p)
			}
		})
	}
}

func TestAcceptsJSON(t *testing.T) {
	for in, want := range map[string]bool{
		"application/json, text/event-stream": true, "text/event-stream": false, "*/*": true,
		"application/*;q=0.5": true, "APPLICATION/JSON": true, "": false, "text/html, text/event-stream": false,
	} {
		if got := acceptsJSON([]string{in}); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}
