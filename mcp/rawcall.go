package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Relaying a tools/call as raw JSON-RPC. The SDK's client decodes a
// server's answer twice, each time with a 32 KB buffer, and the result is
// then encoded again for the caller. A call answered directly (direct.go)
// is instead posted by the handler itself on the upstream session (its
// session id and negotiated protocol version, the gateway's credentials
// and egress guard: the session's own HTTP client), and the server's
// result is relayed as the bytes it sent, once checked (valid JSON, no
// member given twice). The SDK keeps the session itself (initialise,
// version negotiation, listings) and the calls this does not speak: the
// HTTP+SSE transport's, and those of a tool whose schema asks for
// Mcp-Param headers, which the SDK derives from it.

// newProtocol is the first revision whose requests carry the _meta
// triple (protocol version, client info and capabilities) and the
// Mcp-Method and Mcp-Name headers.
const newProtocol = "2026-07-28"

// gatewayClient is the client the gateway says it is upstream.
var gatewayClient = &sdk.Implementation{Name: "caddy-llm-gateway", Version: "1"}

// callDirect calls the server's tool name with p and returns its result
// as JSON (the server's own bytes when relayed raw).
func (h *Handler) callDirect(ctx context.Context, r ref, p *sdk.CallToolParamsRaw) (json.RawMessage, error) {
	var out json.RawMessage
	err := h.callUpstream(ctx, r.u, methodCallTool, r.name, func(callCtx context.Context, cs *sdk.ClientSession) (bool, error) {
		meta := traceMeta(callCtx)
		if r.u.cfg.Transport != app.MCPTransportSSE && !r.paramHeaders {
			var (
				toolError bool
				err       error
			)
			out, toolError, err = r.u.postCall(callCtx, cs, r.name, p, meta)
			return toolError, err
		}
		res, err := cs.CallTool(callCtx, &sdk.CallToolParams{Meta: meta, Name: r.name, Arguments: rawArguments(p.Arguments),
			InputResponses: p.InputResponses, RequestState: p.RequestState})
		if err != nil {
			return false, err
		}
		out, err = json.Marshal(res)
		return res.IsError, err
	})
	return out, err
}

// rawArguments is a call's arguments for the SDK's client (nil when none,
// which it sends as {}).
func rawArguments(a json.RawMessage) any {
	if len(a) == 0 {
		return nil
	}
	return a
}

// postCall posts the tools/call of the server's tool name with p on cs
// and reads the server's answer to it: the result, whether the tool
// answered isError, or the server's JSON-RPC error (*jsonrpc.Error). Any
// other error is the server's or the connection's failure.
func (u *remote) postCall(ctx context.Context, cs *sdk.ClientSession, name string, p *sdk.CallToolParamsRaw, meta map[string]any) (json.RawMessage, bool, error) {
	version := ""
	if ir := cs.InitializeResult(); ir != nil {
		version = ir.ProtocolVersion
	}
	id := `"llmgw-` + strconv.FormatUint(u.callIDs.Add(1), 10) + `"`
	body, err := callBody(id, name, p, meta, version)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if ctx.Err() != nil {
			// The caller gave up: tell the server, as the SDK does.
			go u.cancelCall(cs, version, id)
		}
	}()
	resp, err := u.post(ctx, cs, version, methodCallTool, name, body)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// A server's JSON-RPC error in a non-2xx answer is its answer;
		// anything else is its failure.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxEventSize))
		if _, _, werr := readAnswer(b, id); werr != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(werr, &rpcErr) {
				return nil, false, rpcErr
			}
		}
		return nil, false, fmt.Errorf("the MCP server answered HTTP %d", resp.StatusCode)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxEventSize+1))
		if err != nil {
			return nil, false, err
		}
		if len(b) > maxEventSize {
			return nil, false, errors.New("the MCP server's answer is too large")
		}
		return readAnswer(b, id)
	case "text/event-stream":
		return readStream(resp.Body, id)
	}
	return nil, false, fmt.Errorf("the MCP server answered content of type %q", mt)
}

// post posts one JSON-RPC message of method (name: the tool's) on cs.
func (u *remote) post(ctx context.Context, cs *sdk.ClientSession, version, method, name string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.cfg.URL.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if sid := cs.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version >= newProtocol {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	return u.hc.Do(req)
}

// cancelTimeout bounds telling a server a call was cancelled.
const cancelTimeout = 5 * time.Second

// cancelCall sends notifications/cancelled for the call id (a JSON
// string) posted on cs.
func (u *remote) cancelCall(cs *sdk.ClientSession, version, id string) {
	ctx, cancel := context.WithTimeout(u.life, cancelTimeout)
	defer cancel()
	body := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"the caller cancelled the call"}}`
	if resp, err := u.post(ctx, cs, version, "notifications/cancelled", "", []byte(body)); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
}

// callBody is the tools/call request of name with p's arguments, input
// responses and request state, and meta (the gateway's trace context; on
// the 2026-07-28 revision and later, the _meta triple the revision
// requires on every request).
func callBody(id, name string, p *sdk.CallToolParamsRaw, meta map[string]any, version string) ([]byte, error) {
	if version >= newProtocol {
		m := make(map[string]any, len(meta)+3)
		for k, v := range meta {
			m[k] = v
		}
		m[sdk.MetaKeyProtocolVersion] = version
		m[sdk.MetaKeyClientInfo] = gatewayClient
		m[sdk.MetaKeyClientCapabilities] = struct{}{}
		meta = m
	}
	params := struct {
		Meta           map[string]any       `json:"_meta,omitempty"`
		Name           string               `json:"name"`
		Arguments      json.RawMessage      `json:"arguments"`
		InputResponses sdk.InputResponseMap `json:"inputResponses,omitempty"`
		RequestState   string               `json:"requestState,omitempty"`
	}{meta, name, p.Arguments, p.InputResponses, p.RequestState}
	if len(params.Arguments) == 0 {
		params.Arguments = json.RawMessage("{}")
	}
	pb, err := json.Marshal(&params)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(pb)+len(id)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":"tools/call","params":`...)
	b = append(b, pb...)
	return append(b, '}'), nil
}

var answerMembers = []string{"id", "result", "error"}

// readAnswer reads the JSON-RPC response b to the request id (a JSON
// string). ok-false errors: b is not that response.
func readAnswer(b []byte, id string) (json.RawMessage, bool, error) {
	if jsonlimit.Object(b) != nil {
		return nil, false, errors.New("the MCP server's answer is not one JSON-RPC object")
	}
	var v [3][]byte
	jsonlimit.Members(b, answerMembers, v[:])
	if string(v[0]) != id {
		return nil, false, errNotOurs
	}
	if len(v[2]) > 0 && string(v[2]) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(v[2], &e); err != nil {
			return nil, false, errors.New("the MCP server's error is malformed")
		}
		return nil, false, &e
	}
	if len(v[1]) == 0 || v[1][0] != '{' {
		return nil, false, errors.New("the MCP server's answer has no result")
	}
	isErr, _ := jsonlimit.Member(v[1], "isError")
	return json.RawMessage(v[1]), string(isErr) == "true", nil
}

// errNotOurs is a message of a stream that is not the call's response.
var errNotOurs = errors.New("not the call's response")

// readStream reads server-sent events until the response to id: the
// server's requests and notifications on the call's stream are not
// relayed (no progress was asked for; the gateway makes no
// server-to-client request).
func readStream(body io.Reader, id string) (json.RawMessage, bool, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), maxEventSize)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 {
				res, toolError, err := readAnswer(data, id)
				if !errors.Is(err, errNotOurs) {
					return res, toolError, err
				}
				data = data[:0]
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	if len(data) > 0 {
		if res, toolError, err := readAnswer(data, id); !errors.Is(err, errNotOurs) {
			return res, toolError, err
		}
	}
	return nil, false, errors.New("the MCP server's stream ended before the call's response")
}

// paramHeaders reports whether a tool's input schema asks for Mcp-Param
// headers (x-mcp-header annotations), which the SDK's client derives.
func paramHeaders(t *sdk.Tool) bool {
	b, err := json.Marshal(t.InputSchema)
	return err != nil || strings.Contains(string(b), "x-mcp-header")
}
