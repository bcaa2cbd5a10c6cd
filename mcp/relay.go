package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Relaying. A view's tool and prompt handlers call the server through
// its upstream session: the upstream name, the caller's arguments as they
// came (raw JSON, checked by readMessage), and nothing else of the
// caller's request: not its headers (the gateway key stays here), not its
// _meta, whose protocol keys describe the caller's client, not the
// gateway's. A progress token is replaced by one of the gateway's (the
// upstream session is shared, so callers' tokens could collide) and the
// server's progress notifications are sent back to the caller under its
// own token. Progress is relayed as the SDK hands it over, after the
// server sent it: one sent just before the result may arrive after it,
// and is then dropped (the caller's stream has ended). The caller going away cancels the call, and the SDK tells
// the server so (notifications/cancelled).

// relayTool is the handler of the tool the server lists as name.
func (h *Handler) relayTool(u *remote, name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var res *sdk.CallToolResult
		err := h.callUpstream(ctx, u, methodCallTool, name, func(callCtx context.Context, cs *sdk.ClientSession) (bool, error) {
			p := &sdk.CallToolParams{Name: name, InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
			if len(req.Params.Arguments) > 0 {
				p.Arguments = req.Params.Arguments
			}
			p.Meta = traceMeta(callCtx)
			if tok := req.Params.GetProgressToken(); tok != nil {
				ours := h.progress.add(ctx, req.Session, tok)
				defer h.progress.remove(ours)
				p.SetProgressToken(ours)
			}
			var err error
			res, err = cs.CallTool(callCtx, p)
			return err == nil && res.IsError, err
		})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

// relayPrompt is the handler of the prompt the server lists as name.
func (h *Handler) relayPrompt(u *remote, name string) sdk.PromptHandler {
	return func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		var res *sdk.GetPromptResult
		err := h.callUpstream(ctx, u, methodGetPrompt, name, func(callCtx context.Context, cs *sdk.ClientSession) (bool, error) {
			p := &sdk.GetPromptParams{Name: name, Arguments: req.Params.Arguments,
				InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
			p.Meta = traceMeta(callCtx)
			var err error
			res, err = cs.GetPrompt(callCtx, p)
			return false, err
		})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

// callUpstream makes one call of the server's name (a tool or a prompt)
// through call, on u's session, under the call's span, and records its
// outcome: call reports whether a tool answered isError. The error is
// the caller's (callError).
func (h *Handler) callUpstream(ctx context.Context, u *remote, method, name string,
	call func(callCtx context.Context, cs *sdk.ClientSession) (toolError bool, err error)) error {
	rec := recordFrom(ctx)
	cs, err := u.session(ctx)
	if err != nil {
		return callError(ctx, rec, u, nil, err)
	}
	callCtx, span := startCallSpan(ctx, u, method, name, cs.ID())
	start := time.Now()
	toolError, err := call(callCtx, cs)
	took := time.Since(start)
	rec.setUpstream(took)
	switch {
	case err != nil:
		err = callError(ctx, rec, u, cs, err)
	case toolError:
		rec.setStatus(statusToolError, 0)
	default:
		rec.setStatus(statusOK, 0)
	}
	span.end(rec.errorType())
	observeClient(rec, took)
	return err
}

// callError is the caller's error for a failed call. The server's own
// JSON-RPC error is relayed as it came; any other failure (the server is
// down, broke off, or is refused by the egress policy) drops the session,
// so the next call opens another, and answers -32603 naming the server.
func callError(ctx context.Context, rec *callRecord, u *remote, cs *sdk.ClientSession, err error) error {
	if werr, ok := serverError(err); ok {
		rec.setStatus(statusError, werr.Code)
		return &jsonrpc.Error{Code: werr.Code, Message: werr.Message, Data: werr.Data}
	}
	if ctx.Err() != nil {
		rec.setStatus(statusCancelled, 0)
		return &jsonrpc.Error{Code: codeUnavailable, Message: "the call was cancelled"}
	}
	if cs != nil {
		u.drop(cs)
	}
	rec.setStatus(statusUnavailable, codeUnavailable)
	rec.setError(err)
	data, _ := json.Marshal(map[string]string{"server": u.cfg.Name})
	return &jsonrpc.Error{Code: codeUnavailable, Message: unreachable(u.cfg.Name, err), Data: data}
}

// The SDK's own JSON-RPC errors for a message its transport could not
// deliver or answer (jsonrpc2's ErrRejected, ErrClientClosing,
// ErrServerClosing): the server did not answer them.
const (
	sdkRejected      = -32005
	sdkClientClosing = -32003
	sdkServerClosing = -32004
)

// serverError returns the JSON-RPC error the server answered, if err is
// one. The SDK wraps its transport failures in JSON-RPC errors of its own
// (a server's error in a non-2xx answer comes first in the chain, so
// errors.As finds it before the SDK's wrapper).
func serverError(err error) (*jsonrpc.Error, bool) {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return nil, false
	}
	switch werr.Code {
	case sdkRejected, sdkClientClosing, sdkServerClosing:
		return nil, false
	}
	return werr, true
}

// progressRoutes maps the gateway's progress tokens to the callers'.
type progressRoutes struct {
	mu   sync.Mutex
	next uint64
	m    map[string]progressRoute
}

type progressRoute struct {
	// ctx is the caller's call: a notification sent under it goes on the
	// call's own response stream.
	ctx     context.Context
	session *sdk.ServerSession
	token   any
}

func newProgressRoutes() *progressRoutes { return &progressRoutes{m: make(map[string]progressRoute)} }

// add routes a new token of the gateway's to the caller's token and
// returns it.
func (p *progressRoutes) add(ctx context.Context, ss *sdk.ServerSession, token any) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	ours := "llmgw-" + strconv.FormatUint(p.next, 10)
	p.m[ours] = progressRoute{ctx: ctx, session: ss, token: token}
	return ours
}

func (p *progressRoutes) remove(ours string) {
	p.mu.Lock()
	delete(p.m, ours)
	p.mu.Unlock()
}

// relay is every upstream client's progress handler: a notification for
// a token of the gateway's goes to its caller; any other is dropped.
func (p *progressRoutes) relay(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	ours, _ := req.Params.ProgressToken.(string)
	p.mu.Lock()
	r, ok := p.m[ours]
	p.mu.Unlock()
	if !ok || r.session == nil {
		return
	}
	_ = r.session.NotifyProgress(r.ctx, &sdk.ProgressNotificationParams{
		ProgressToken: r.token, Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message,
	})
}
