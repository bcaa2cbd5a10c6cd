package mcp

import (
	"encoding/json"
	"net/http"
)

// JSON-RPC error codes the handler answers with itself. The protocol's
// own: a message that is not JSON (-32700), not a request this gateway
// serves (-32600), a call of a name the caller cannot use (-32602, the
// SDK's "unknown tool"), and a server that cannot be reached (-32603,
// with data naming the server).
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeUnavailable    = -32603
	// codeLimited is a call a rate limit or usage limit refused (in the
	// range JSON-RPC leaves to servers), with data giving the gateway's
	// error type and code and the HTTP status, which the answer has too.
	codeLimited = -32029
	// codeUnauthorized and codeNotFound go with HTTP 401 and 404, whose
	// status says what failed; JSON-RPC has no code of its own for them.
	codeUnauthorized = codeInvalidRequest
	codeNotFound     = codeInvalidRequest
)

// rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcErrorBody    `json:"error"`
}

type rpcErrorBody struct {
	Code    int64          `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

var nullID = json.RawMessage("null")

// writeError answers a JSON-RPC error for the request whose raw id is id
// (nil before the id is known, or for a notification), with the HTTP
// status given.
func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string, data map[string]any) {
	if len(id) == 0 {
		id = nullID
	}
	body, _ := json.Marshal(rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorBody{Code: code, Message: msg, Data: data}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
