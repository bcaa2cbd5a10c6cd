package handlers

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sse"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/realtime"
)

// The Responses API's WebSocket mode. A WebSocket upgrade of
// /v1/responses is authenticated as any request (the gateway key, its
// headers), then each response.create on the socket runs as a POST
// /v1/responses with stream: true of its own, through the whole pipeline
// (runInput, as managed batch lines run): parse, the key's models,
// llm_ratelimit's stage when one admitted the upgrade, usage limits,
// plan, guardrails, retries and fallbacks, translation for targets that
// do not speak the Responses API, stored responses and
// previous_response_id, one log line and one ledger record per response.
// Its SSE answer is cut into events, one message each; an error answer
// becomes an error event. The socket itself is one access-log line with
// its totals and no ledger record.

// opResponsesWS is the logged operation of a Responses WebSocket.
const opResponsesWS providers.Operation = "responses_websocket"

// responsesPath is where the Responses WebSocket opens.
const responsesPath = "/v1/responses"

// maxErrorAnswer bounds the error answer a response's refusal is read
// from (the gateway's and providers' envelopes are far smaller).
const maxErrorAnswer = 64 << 10

// responsesUpgrade reports whether r opens a Responses WebSocket.
func responsesUpgrade(r *http.Request) bool {
	return r.URL.Path == responsesPath && realtime.IsUpgrade(r)
}

// serveResponsesWS upgrades the client and serves its socket until it
// ends. q is the upgrade, authenticated; an error before the upgrade is
// the client's HTTP answer.
func (g *Gateway) serveResponsesWS(r *http.Request, q *Request, f *flight) error {
	f.socket = true
	q.Call.Op = opResponsesWS
	lim := g.Realtime.Limits()
	release, ok := g.sockets.Acquire(q.Identity.Name+"\x00"+q.Identity.WorkspaceID, lim.MaxPerKey)
	if !ok {
		return apierror.Newf(http.StatusTooManyRequests, apierror.TypeRateLimit,
			"this key holds the most WebSocket sessions it may open at once (%d); close one first", lim.MaxPerKey).WithCode("too_many_sockets")
	}
	defer release()
	var conn *websocket.Conn
	var err error
	f.out.control(func(w http.ResponseWriter) {
		// Keys travel in headers, never in ambient credentials
		// (cookies), so any origin may open a socket with a key of its
		// own.
		conn, err = websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled})
	})
	if err != nil {
		// Accept answered the client itself (a bad handshake).
		return nil
	}
	resp := &wsResponder{g: g, id: q.Identity, key: q.Header.APIKey, header: responsesHeader(r.Header),
		admission: handoff.From(r.Context()).Admission(g.app.Issuer())}
	s := realtime.NewResponsesSession(conn, lim, resp)
	if !g.hub.Add(s) {
		s.GoAway()
	}
	defer g.hub.Remove(s)
	tot := s.Run(r.Context())
	tot.Usage.Tokens = resp.usage
	f.entry.Extra = append(f.entry.Extra, zap.Object("responses_websocket", totalsLog(tot)))
	return nil
}

// responsesHeader is the upgrade's header as each response's POST
// carries it: the client's own headers (routing, metadata, trace id,
// provider keys) without the handshake's.
func responsesHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		switch {
		case k == "Connection", k == "Upgrade", k == "Content-Length", k == "Accept-Encoding",
			strings.HasPrefix(k, "Sec-Websocket-"):
			continue
		}
		out[k] = v
	}
	out.Set("Content-Type", "application/json")
	out.Set("Accept", "text/event-stream")
	return out
}

// wsResponder runs a socket's responses as its upgrade's caller: the
// key authenticated at the upgrade, the stage that admitted it. The key
// is authenticated again before each response, so a key revoked,
// expired or changed while the socket is open is seen at the next
// response.create, as the next HTTP request would see it.
type wsResponder struct {
	g  *Gateway
	id *identity.Caller
	// key is the gateway key the upgrade presented (a token for an
	// identity provider's caller).
	key       string
	header    http.Header
	admission string
	// usage sums the responses' usage, for the socket's log line.
	usage providers.Usage
}

// Respond implements realtime.Responder.
func (w *wsResponder) Respond(ctx context.Context, c realtime.Create, send func([]byte) error) *realtime.Refusal {
	id, ok := w.g.app.Authenticate(w.key)
	if !ok {
		e := w.g.app.AuthError(w.key)
		code, _ := e.Code.(string)
		return &realtime.Refusal{Type: e.Type, Code: code, Message: e.Message, Status: http.StatusUnauthorized}
	}
	w.id = id
	out := &wsAnswer{header: make(http.Header), send: send}
	f, err := w.g.runInput(ctx, &Input{Path: responsesPath, Header: w.header, Body: c.Body, Identity: w.id, Admission: w.admission}, out)
	if err != nil {
		return &realtime.Refusal{Type: apierror.TypeServer, Code: "internal_error", Message: "the gateway could not run the response", Status: http.StatusInternalServerError}
	}
	if f != nil && f.entry.Usage != nil {
		u := f.entry.Usage
		w.usage.PromptTokens += u.PromptTokens
		w.usage.CompletionTokens += u.CompletionTokens
		w.usage.TotalTokens += u.TotalTokens
		w.usage.CachedTokens += u.CachedTokens
	}
	switch {
	case out.sendErr != nil:
		// The client is gone or does not read: the session ends.
		return nil
	case out.status != 0 && out.status != http.StatusOK:
		return refusalOf(out.status, out.body.Bytes())
	case f != nil && f.res != nil && f.res.abort:
		return &realtime.Refusal{Type: apierror.TypeUpstream, Code: "upstream_error", Status: http.StatusBadGateway,
			Message: "the provider's stream broke off before the response completed"}
	}
	return nil
}

// wsAnswer is a response's client: a 200 answer is a Responses SSE
// stream, whose events it sends as they are written; any other answer
// is an error envelope, kept (bounded) for the error event.
type wsAnswer struct {
	header  http.Header
	status  int
	split   sse.Splitter
	body    bytes.Buffer
	send    func([]byte) error
	sendErr error
}

func (a *wsAnswer) Header() http.Header { return a.header }

func (a *wsAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *wsAnswer) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.sendErr != nil {
		return 0, a.sendErr
	}
	if a.status != http.StatusOK {
		if a.body.Len()+len(p) > maxErrorAnswer {
			p = p[:max(0, maxErrorAnswer-a.body.Len())]
		}
		a.body.Write(p)
		return len(p), nil
	}
	err := a.split.Feed(p, func(ev *sse.Event) bool {
		data := bytes.TrimSpace(ev.Data)
		if !ev.HasData || len(data) == 0 || data[0] != '{' {
			// Comments, keep-alives, a [DONE] marker: SSE framing,
			// not events of the WebSocket mode.
			return true
		}
		// send copies nothing: the splitter's slices are reused, but
		// the write is done when send returns.
		a.sendErr = a.send(data)
		return a.sendErr == nil
	})
	if a.sendErr != nil {
		return 0, a.sendErr
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush implements http.Flusher: events are sent as they complete.
func (a *wsAnswer) Flush() {}
