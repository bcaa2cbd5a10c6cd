package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/realtime"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// Realtime sessions. A WebSocket upgrade of /v1/realtime takes the
// pipeline's first part as any request does (gateway key, headers,
// virtual key or config, the key's models, usage limits, llm_ratelimit
// in front), then, instead of an attempt, opens a WebSocket to the
// planned target with the provider's credentials and relays the two
// (package realtime). Each response the provider reports is a request of
// its own to the limits and the ledger: reserved when response.created
// arrives, settled and recorded when response.done does (socketMeter).
// The socket itself is one access-log line with the session's totals,
// and no ledger record.

// opRealtime is the logged operation of a realtime session and of each
// of its responses.
const opRealtime providers.Operation = "realtime"

// realtimePath is where sessions are opened.
const realtimePath = "/v1/realtime"

// clientSecretsPath mints the Realtime API's ephemeral client secrets
// (under /v1): an ordinary HTTP call forwarded to the provider with its
// key, under the caller's limits, whose model is session.model.
const clientSecretsPath = "/realtime/client_secrets"

// mintsClientSecret reports whether c mints a Realtime client secret.
func mintsClientSecret(c *providers.Call) bool {
	return c.Method == http.MethodPost && c.Path == clientSecretsPath
}

// clientSecretModel sets c.Model from a client secret request's
// session.model, so the key's allowed models, model-keyed limits and the
// ledger see the model the secret is for. The body passed the strict
// JSON check (a repeated member is refused); names compare decoded.
func clientSecretModel(c *providers.Call) error {
	if !mintsClientSecret(c) || len(c.Body) == 0 {
		return nil
	}
	session, ok := jsonlimit.Member(c.Body, "session")
	if !ok {
		return nil
	}
	raw, ok := jsonlimit.Member(session, "model")
	if !ok {
		return nil
	}
	m, ok := jsonlimit.String(raw)
	if !ok {
		return apierror.BadRequest("session.model", "session.model must be a string")
	}
	c.Model = m
	return nil
}

// realtimeDialTimeout bounds the provider's WebSocket handshake.
const realtimeDialTimeout = 30 * time.Second

// realtimeUpgrade reports whether r opens a Realtime session.
func realtimeUpgrade(r *http.Request) bool {
	return r.URL.Path == realtimePath && realtime.IsUpgrade(r)
}

// serveRealtime plans the session, dials the provider, upgrades the
// client and relays until the session ends. An error before the upgrade
// is the client's HTTP answer.
func (g *Gateway) serveRealtime(r *http.Request, q *Request, f *flight) error {
	f.socket = true
	q.Call.Model = r.URL.Query().Get("model")
	if err := checkModel(q.Identity, &q.Call); err != nil {
		return err
	}
	if err := g.plan(r, q); err != nil {
		return err
	}
	f.planned = true
	lim := g.Realtime.Limits()
	release, ok := g.sockets.Acquire(q.Identity.Name+"\x00"+q.Identity.WorkspaceID, lim.MaxPerKey)
	if !ok {
		return apierror.Newf(http.StatusTooManyRequests, apierror.TypeRateLimit,
			"this key holds the most realtime sessions it may open at once (%d); close one first", lim.MaxPerKey).WithCode("too_many_sockets")
	}
	defer release()
	if err := g.admitBudget(r, q, f); err != nil {
		return err
	}
	up, t, err := g.dialRealtime(r, q)
	if err != nil {
		return err
	}
	f.res = &result{answerInfo: answerInfo{target: t, label: statusNoCache}, model: q.Call.Model}
	var client *websocket.Conn
	f.out.control(func(w http.ResponseWriter) {
		// Keys travel in headers or the subprotocol, never in ambient
		// credentials (cookies), so any origin may open a session with
		// a key of its own.
		client, err = websocket.Accept(w, r, &websocket.AcceptOptions{
			Subprotocols:       realtime.Subprotocols,
			InsecureSkipVerify: true,
			CompressionMode:    websocket.CompressionDisabled,
		})
	})
	if err != nil {
		// Accept answered the client itself (a bad handshake).
		_ = up.CloseNow()
		return nil
	}
	m := &socketMeter{g: g, q: q, f: f, target: t, model: q.Call.Model, ctx: r.Context(),
		stageKey: handoff.From(r.Context()).Admission(g.app.Issuer())}
	s := realtime.NewSession(client, up, lim, m)
	if !g.hub.Add(s) {
		s.GoAway()
	}
	defer g.hub.Remove(s)
	tot := s.Run(r.Context())
	f.entry.Extra = append(f.entry.Extra, zap.Object("realtime", totalsLog(tot)))
	return nil
}

// dialRealtime opens the provider's WebSocket for q: the plan's targets
// in order, the first that accepts the handshake (a fallback for the
// connection only: once open, a session stays with its provider). Every
// address passes the egress policy of its target.
func (g *Gateway) dialRealtime(r *http.Request, q *Request) (*websocket.Conn, *routing.Target, error) {
	var last error = apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the plan has no target")
	for _, t := range q.Plan.Leaves {
		p := q.attemptFor(t)
		if p.err != nil {
			last = p.err
			continue
		}
		prov, ok := providers.Lookup(t.Settings.Provider)
		if !ok {
			last = apierror.BadRequest("provider", "unknown provider %q", t.Settings.Provider)
			continue
		}
		call := p.call(q)
		u := providers.Upstream{Header: make(http.Header, 4)}
		ctx := r.Context()
		if t.GuardEgress {
			call.Egress = g.guard
			ctx = upstream.WithGuard(ctx, g.guard)
		}
		if err := prov.Prepare(&call, &t.Settings, &u); err != nil {
			last = err
			continue
		}
		guarded, tls := 0, 0
		if t.GuardEgress {
			guarded = 1
		}
		if u.URL.Scheme == "https" {
			tls = 1
			caddyhttp.SetVar(ctx, upstream.VarServerName, u.URL.Hostname())
		}
		h := u.Header
		if v := q.ClientHeader.Get("Openai-Beta"); v != "" {
			h.Set("Openai-Beta", v)
		}
		if _, ok := h["User-Agent"]; !ok {
			h["User-Agent"] = noUserAgent
		}
		conn, resp, err := websocket.Dial(ctx, u.URL.String(), &websocket.DialOptions{
			HTTPClient:      &http.Client{Transport: g.transports[guarded][tls], Timeout: realtimeDialTimeout},
			HTTPHeader:      h,
			CompressionMode: websocket.CompressionDisabled,
		})
		if err == nil {
			return conn, t, nil
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != 0 {
			last = apierror.Newf(resp.StatusCode, apierror.TypeUpstream,
				"provider %s refused the realtime session (status %d)", t.Settings.Provider, resp.StatusCode).WithCode("upstream_refused")
			continue
		}
		last, _ = upstreamError(t, err)
	}
	return nil, nil, last
}

// totalsLog is a session's totals as its log line's "realtime" object.
type totalsLog realtime.Totals

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (t totalsLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt64("messages_in", t.MessagesIn)
	enc.AddInt64("messages_out", t.MessagesOut)
	enc.AddInt64("bytes_in", t.BytesIn)
	enc.AddInt64("bytes_out", t.BytesOut)
	enc.AddInt64("responses", t.Responses)
	enc.AddInt64("input_tokens", t.Usage.Tokens.PromptTokens)
	enc.AddInt64("output_tokens", t.Usage.Tokens.CompletionTokens)
	enc.AddInt64("cached_tokens", t.Usage.Tokens.CachedTokens)
	enc.AddInt64("input_audio_tokens", t.Usage.InputAudio)
	enc.AddInt64("output_audio_tokens", t.Usage.OutputAudio)
	enc.AddString("close_cause", t.Cause)
	enc.AddInt("close_code", int(t.Code))
	return nil
}

// socketMeter bills a session's responses as requests of their own: the
// route's llm_ratelimit stage (when one admitted the upgrade) and the
// usage limits reserve each, and its end settles them, records it in the
// ledger and prices it.
type socketMeter struct {
	g      *Gateway
	q      *Request
	f      *flight
	target *routing.Target
	model  string
	// stageKey names the llm_ratelimit stage that admitted the upgrade
	// ("" when none did).
	stageKey string
	// ctx is the upgrade's: each response's span is a child of its
	// server span (Caddy's tracing directive), as an attempt's is.
	ctx context.Context
}

// Open implements realtime.Meter.
func (m *socketMeter) Open(id string) (realtime.Charge, *realtime.Refusal) {
	g := m.g
	// The key is authenticated again for each response, so one revoked,
	// expired or rotated out while the socket is open ends the session
	// at its next response, as it refuses the next HTTP request.
	who, ok := g.app.Authenticate(m.q.Header.APIKey)
	if !ok {
		e := g.app.AuthError(m.q.Header.APIKey)
		code, _ := e.Code.(string)
		return nil, &realtime.Refusal{Type: e.Type, Code: code, Message: e.Message, Status: http.StatusUnauthorized}
	}
	body, _ := json.Marshal(struct {
		Model string `json:"model"`
	}{m.model})
	// Each response is admitted as an MCP tool call is: the one admission
	// of a call inside a connection (the route's llm_ratelimit stage, then
	// the usage limits unless that stage applied them).
	req, ref := g.app.AdmitCall(context.Background(), m.stageKey, g.budget, who, realtimePath, m.q.ClientHeader.Clone(), body)
	if ref != nil {
		return nil, &realtime.Refusal{Type: ref.Type, Code: ref.Code, Message: ref.Message, Status: ref.Status}
	}
	_, span := observe.StartAttempt(m.ctx, observe.AttemptInfo{Operation: opRealtime, Provider: m.target.Settings.Provider,
		RequestModel: m.model, Stream: true, Target: m.target.Path})
	return &responseCharge{m: m, req: req, id: id, start: time.Now(), span: span}, nil
}

// refusalOf reads a refusal written as an HTTP answer in the OpenAI
// envelope (the admission stage's, a Responses WebSocket response's).
func refusalOf(status int, body []byte) *realtime.Refusal {
	e := gjson.GetBytes(body, "error")
	ref := &realtime.Refusal{Type: e.Get("type").Str, Code: e.Get("code").Str, Message: e.Get("message").Str, Param: e.Get("param").Str, Status: status}
	if ref.Message == "" {
		ref.Message = "the gateway's limits refused the response"
	}
	if ref.Type == "" {
		ref.Type = apierror.TypeRateLimit
	}
	return ref
}

// responseCharge is one response's reservation.
type responseCharge struct {
	m     *socketMeter
	req   *http.Request
	id    string
	start time.Time
	// span is the response's, from response.created to response.done.
	span observe.AttemptSpan
}

// Close implements realtime.Charge: one ledger record and one
// settlement per response.
func (c *responseCharge) Close(d realtime.Done) {
	m, q := c.m, c.m.q
	e := observe.Entry{
		TraceID: m.f.out.traceID, Operation: opRealtime, Method: http.MethodGet, Path: "/realtime",
		Provider: m.target.Settings.Provider, Model: m.model, ConfigID: q.Plan.ConfigID, VirtualKey: q.RouteHeader.VirtualKey,
		Stream: true, Start: c.start, CacheState: statusNoCache, Status: http.StatusOK,
	}
	if id := q.Identity; id != nil {
		e.KeyName, e.Workspace, e.Organisation = id.Name, id.WorkspaceID, id.OrganisationID
	}
	if q.Header != nil {
		e.Metadata = q.Header.Metadata
	}
	if d.Status == "failed" {
		e.Status = http.StatusBadGateway
	}
	if d.Usage != nil {
		u := d.Usage.Tokens
		e.Usage = &u
		e.CostUSD, e.CostKnown = realtimeCost(m.g, m.target.Settings.Provider, m.model, d.Usage)
	}
	e.Extra = []zap.Field{zap.String("response_id", c.id), zap.String("response_status", d.Status)}
	res := observe.Result{StatusCode: e.Status, ResponseModel: m.model, ResponseID: c.id, Usage: e.Usage}
	if d.Status != "completed" {
		res.ErrorType = "response_" + d.Status
	}
	c.span.End(res)
	if c.req != nil {
		// nil when no limit could apply: nothing to settle.
		observe.RunDone(c.req, &e)
	}
	m.g.app.UsageLedger().Record(&e)
}

// realtimeCost prices a response's usage at the model's catalog prices:
// audio tokens at the audio prices when the catalog has them.
func realtimeCost(g *Gateway, provider, model string, u *realtime.Usage) (float64, bool) {
	p, ok := g.app.Prices().Price(provider, model)
	if !ok {
		return 0, false
	}
	return p.CostAudio(u.Tokens, u.InputAudio, u.CachedAudio, u.OutputAudio), true
}
