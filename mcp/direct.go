package mcp

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Answering a tools/call without the SDK's server. The SDK's stateless
// handler opens a server session per message and decodes the message
// four times, each with a 32 KB buffer (readBatch, extractRequestMeta,
// validateRequestMeta, newServerMethodInfo): most of what a relayed call
// cost. A tools/call is already read and checked here (readMessage), its
// name resolved and its limits applied, so the handler calls the same
// relay (relayTool) itself and answers with one JSON-RPC response. The
// SDK still serves everything else: initialisation and version
// negotiation, listings, notifications, and the calls it must see to
// relay (one asking for progress, which needs the SDK's response stream)
// or to refuse (a protocol version it does not speak, parameter headers,
// which it checks against the body).

// callParams are the members of a tools/call's params relayed upstream.
var callParams = []string{"arguments", "inputResponses", "requestState", "_meta"}

// directCall is the tools/call msg read for the direct answer; ok is
// false when the SDK's server must take it.
func directCall(r *http.Request, msg *message) (p *sdk.CallToolParamsRaw, ok bool) {
	if !acceptsJSON(r.Header.Values("Accept")) {
		return nil, false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(sdk.SupportedProtocolVersions(), v) {
		return nil, false
	}
	if v := r.Header.Get("Mcp-Method"); v != "" && v != msg.method {
		return nil, false
	}
	if v := r.Header.Get("Mcp-Name"); v != "" && v != msg.name {
		return nil, false
	}
	for k := range r.Header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			return nil, false
		}
	}
	var params [1][]byte
	jsonlimit.Members(msg.body, []string{"params"}, params[:])
	var v [4][]byte
	jsonlimit.Members(params[0], callParams, v[:])
	if len(v[3]) > 0 {
		// _meta: a progress token needs the SDK's response stream; the
		// rest of the caller's _meta is never forwarded.
		if tok, _ := jsonlimit.Member(v[3], "progressToken"); len(tok) > 0 {
			return nil, false
		}
	}
	p = &sdk.CallToolParamsRaw{Name: msg.name}
	if a := v[0]; len(a) > 0 && string(a) != "null" {
		if a[0] != '{' {
			return nil, false // the SDK's refusal of arguments that are not an object
		}
		p.Arguments = json.RawMessage(a)
	}
	if len(v[1]) > 0 && json.Unmarshal(v[1], &p.InputResponses) != nil {
		return nil, false
	}
	if len(v[2]) > 0 {
		s, isString := jsonlimit.String(v[2])
		if !isString {
			return nil, false
		}
		p.RequestState = s
	}
	return p, true
}

// acceptsJSON reports whether an Accept header admits a JSON answer.
func acceptsJSON(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*", "*/*":
				return true
			}
		}
	}
	return false
}

// answerCall relays the call of ref with p (callDirect) and writes its
// JSON-RPC response for the request id.
func (h *Handler) answerCall(w http.ResponseWriter, r *http.Request, id json.RawMessage, ref ref, p *sdk.CallToolParamsRaw) {
	result, err := h.callDirect(r.Context(), ref, p)
	if len(id) == 0 {
		id = nullID
	}
	var body []byte
	if err == nil {
		body = make([]byte, 0, len(result)+len(id)+32)
		body = append(append(append(append(append(body, `{"jsonrpc":"2.0","id":`...), id...), `,"result":`...), result...), '}')
	}
	if err != nil {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) {
			werr = &jsonrpc.Error{Code: codeUnavailable, Message: "the gateway could not encode the result"}
		}
		body, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", id, werr})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
