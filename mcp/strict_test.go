package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadMessage(t *testing.T) {
	tests := []struct {
		name, body   string
		method, item string
		id           string
		status       int
		code         int64
		msg          string
	}{
		{name: "tools/call", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files__read","arguments":{"Path":"a","path":"b"}}}`,
			method: "tools/call", item: "files__read", id: "3", status: 0, msg: "differs only in case"},
		{name: "tools/call ok", body: `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"files__read","arguments":{"p":1}}}`,
			method: "tools/call", item: "files__read", id: `"a"`},
		{name: "escaped name", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"x"}}`, method: "tools/call", item: "x", id: "1"},
		{name: "prompts/get", body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, method: "prompts/get", item: "p", id: "1"},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, method: "notifications/initialized"},
		{name: "object id is not kept", body: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, method: "ping"},
		{name: "Name beside name", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}`, status: 400, code: codeInvalidRequest, msg: `"params.Name"`},
		{name: "name twice", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, status: 400, code: codeInvalidRequest, msg: "more than once"},
		{name: "escaped duplicate", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","n\u0061me":"b"}}`, status: 400, code: codeInvalidRequest, msg: "more than once"},
		{name: "batch", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, status: 400, code: codeInvalidRequest, msg: "batches"},
		{name: "not JSON", body: `{"jsonrpc":`, status: 400, code: codeParse},
		{name: "too deep", body: `{"a":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, status: 400, code: codeInvalidRequest, msg: "nesting"},
		{name: "call without a name", body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}`, status: 200, code: codeInvalidParams, id: "9", msg: "params.name"},
		{name: "call with a number name", body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":1}}`, status: 200, code: codeInvalidParams, id: "9"},
		{name: "too big", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 200) + `"}}`, status: 413, code: codeInvalidRequest, msg: "200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body))
			max := int64(1 << 20)
			if tt.name == "too big" {
				max = 200
			}
			m, e := readMessage(r, max)
			if tt.name == "tools/call" {
				// Case variants are refused in arguments too: an upstream
				// server reads them with a reader of its own.
				if e == nil || e.status != 400 || !strings.Contains(e.message, tt.msg) {
					t.Fatalf("got %+v, want a refusal", e)
				}
				return
			}
			if tt.status != 0 {
				if e == nil || e.status != tt.status || e.code != tt.code || !strings.Contains(e.message, tt.msg) || string(e.id) != tt.id {
					t.Fatalf("got %+v, want status %d code %d id %s saying %q", e, tt.status, tt.code, tt.id, tt.msg)
				}
				return
			}
			if e != nil {
				t.Fatalf("refused: %+v", e)
			}
			if m.method != tt.method || m.name != tt.item || string(m.id) != tt.id || string(m.body) != tt.body {
				t.Fatalf("read %q %q id %s", m.method, m.name, m.id)
			}
		})
	}
}
