package mcp

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Strict reading. The gateway decides access on a message's method and
// params.name before the SDK decodes the message, and an upstream server
// (whatever its JSON reader) acts on it after: both must read the same
// message. So a message is refused unless it has exactly one reading:
// valid UTF-8 JSON nested at most jsonlimit.MaxDepth levels, no member
// named twice (jsonlimit.Check), no two members whose names differ only in
// case anywhere in it (jsonlimit.CheckFold: {"name":"allowed",
// "Name":"denied"} is one name given twice to a case-insensitive reader,
// as in Envoy AI Gateway's GHSA-4gph-2hhr-5mwg), one JSON-RPC object (no
// batch), within the size bound. Members are then matched case-sensitively,
// as the SDK's decoder does.

// MCP methods the handler reads a name from.
const (
	methodCallTool  = "tools/call"
	methodGetPrompt = "prompts/get"
)

// message is what the handler reads of a client's JSON-RPC message.
type message struct {
	body   []byte
	method string
	// id is the raw id, a string or a number (nil for a notification or
	// an id of another type, which the SDK refuses).
	id []byte
	// name is params.name of a tools/call or prompts/get.
	name string
}

// messageError is a message refused before the SDK sees it.
type messageError struct {
	status  int
	id      []byte
	code    int64
	message string
}

var messageMembers = []string{"id", "method", "params"}

// readMessage reads and checks r's body, at most max bytes.
func readMessage(r *http.Request, max int64) (*message, *messageError) {
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, &messageError{status: http.StatusBadRequest, code: codeParse, message: "reading the request body failed"}
	}
	if int64(len(body)) > max {
		return nil, &messageError{status: http.StatusRequestEntityTooLarge, code: codeInvalidRequest,
			message: fmt.Sprintf("the message exceeds this gateway's limit of %d bytes", max)}
	}
	if err := jsonlimit.Check(body); err != nil {
		return nil, checkError(err)
	}
	if err := jsonlimit.CheckFold(body); err != nil {
		d, _ := jsonlimit.AsDuplicate(err)
		return nil, &messageError{status: http.StatusBadRequest, code: codeInvalidRequest,
			message: fmt.Sprintf("the JSON member %q has another member whose name differs only in case; member names are case-sensitive and each is given once", d.Path)}
	}
	if jsonlimit.Object(body) != nil {
		return nil, &messageError{status: http.StatusBadRequest, code: codeInvalidRequest,
			message: "a message is one JSON-RPC request or notification object (batches are not accepted)"}
	}
	var v [3][]byte
	jsonlimit.Members(body, messageMembers, v[:])
	m := &message{body: body}
	if len(v[0]) > 0 && (v[0][0] == '"' || v[0][0] == '-' || '0' <= v[0][0] && v[0][0] <= '9') {
		m.id = v[0]
	}
	if len(v[1]) > 0 {
		m.method, _ = jsonlimit.String(v[1])
	}
	if m.method != methodCallTool && m.method != methodGetPrompt {
		return m, nil
	}
	var name []byte
	if len(v[2]) > 0 && v[2][0] == '{' {
		name, _ = jsonlimit.Member(v[2], "name")
	}
	s, ok := jsonlimit.String(name)
	if !ok || s == "" {
		return nil, &messageError{status: http.StatusOK, id: m.id, code: codeInvalidParams,
			message: m.method + " needs params.name, a non-empty string"}
	}
	m.name = s
	return m, nil
}

// checkError is the refusal of a body jsonlimit.Check refused.
func checkError(err error) *messageError {
	e := &messageError{status: http.StatusBadRequest, code: codeInvalidRequest}
	switch d, dup := jsonlimit.AsDuplicate(err); {
	case dup:
		e.message = fmt.Sprintf("the JSON member %q appears more than once", d.Path)
	case errors.Is(err, jsonlimit.ErrTooDeep), errors.Is(err, jsonlimit.ErrSurrogateName):
		e.message = err.Error()
	default:
		e.code, e.message = codeParse, "the message is not valid JSON"
	}
	return e
}

// kindOf names what method calls, for errors.
func kindOf(method string) string {
	if method == methodGetPrompt {
		return "prompt"
	}
	return "tool"
}
