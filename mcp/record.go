package mcp

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// Records. Each tools/call (and prompts/get) is logged once: as an "mcp"
// object inside Caddy's access log entry for the request when the site
// logs it (the log writer llm_gateway's entries use, observe's
// AccessLogFields), else as the handler's own "mcp call" entry. A record
// names the caller (key name, workspace), the server, the upstream and
// exposed names, the outcome, the latency and the sizes. It never holds
// arguments, results or credentials.

// Outcomes of a call.
const (
	statusOK          = "ok"
	statusToolError   = "tool_error"  // the tool answered isError
	statusError       = "error"       // the server answered a JSON-RPC error
	statusUnavailable = "unavailable" // the server could not be reached
	statusCancelled   = "cancelled"
	statusDenied      = "denied"   // the caller's key cannot use the name
	statusRejected    = "rejected" // the SDK refused the message
	statusLimited     = "limited"  // a rate or usage limit refused the call
)

type callRecord struct {
	mu sync.Mutex
	// Method is tools/call or prompts/get; Name is the exposed name the
	// caller called, Server and Upstream what it stands for.
	Method, Name, Server, Upstream string
	KeyName, Workspace             string
	Organisation                   string
	Status                         string
	Code                           int64
	Start                          time.Time
	Duration, UpstreamTime         time.Duration
	RequestBytes, ResponseBytes    int64
	// Error is why the server could not be reached (never its address).
	Error string
	// limit is the refusal of a limited call.
	limit *app.CallRefusal
}

func newCallRecord(id *identity.Caller, m *message) *callRecord {
	return &callRecord{Method: m.method, Name: m.name, KeyName: id.Name, Workspace: id.WorkspaceID, Organisation: id.OrganisationID,
		Start: time.Now(), RequestBytes: int64(len(m.body))}
}

func (r *callRecord) setStatus(s string, code int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.Status, r.Code = s, code
	r.mu.Unlock()
}

func (r *callRecord) setUpstream(d time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.UpstreamTime = d
	r.mu.Unlock()
}

// finish records the answer's size and the call's duration, and, when no
// relay ran, that the SDK refused the message.
func (r *callRecord) finish(responseBytes int64) {
	r.mu.Lock()
	r.ResponseBytes, r.Duration = responseBytes, time.Since(r.Start)
	if r.Status == "" {
		r.Status = statusRejected
	}
	r.mu.Unlock()
}

// setError keeps a short reason, of the error's kind only: a transport
// error's text may hold the server's address.
func (r *callRecord) setError(err error) {
	if r == nil || err == nil {
		return
	}
	r.mu.Lock()
	r.Error = unreachable(r.Server, err)
	r.mu.Unlock()
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (r *callRecord) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	enc.AddString("method", r.Method)
	enc.AddString("server", r.Server)
	enc.AddString("tool", r.Upstream)
	enc.AddString("name", r.Name)
	enc.AddString("api_key_name", r.KeyName)
	enc.AddString("workspace_id", r.Workspace)
	enc.AddString("status", r.Status)
	if r.Code != 0 {
		enc.AddInt64("code", r.Code)
	}
	enc.AddFloat64("duration_ms", float64(r.Duration.Microseconds())/1000)
	if r.UpstreamTime > 0 {
		enc.AddFloat64("upstream_ms", float64(r.UpstreamTime.Microseconds())/1000)
	}
	enc.AddInt64("request_bytes", r.RequestBytes)
	enc.AddInt64("response_bytes", r.ResponseBytes)
	if r.Error != "" {
		enc.AddString("error", r.Error)
	}
	if r.limit != nil {
		enc.AddString("limit_code", r.limit.Code)
	}
	return nil
}

// logCall writes rec once (see Records).
func (h *Handler) logCall(req *http.Request, rec *callRecord) {
	if extra := observe.AccessLogFields(req); extra != nil {
		extra.Add(zap.Object("mcp", rec))
		return
	}
	lvl := zapcore.InfoLevel
	if rec.Status == statusUnavailable {
		lvl = zapcore.WarnLevel
	}
	if ce := h.logger.Check(lvl, "mcp call"); ce != nil {
		ce.Write(zap.Object("mcp", rec))
	}
}

type recordKey struct{}

func withRecord(ctx context.Context, r *callRecord) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// recordFrom returns the record ServeHTTP made for the call (nil-safe to
// use when there is none).
func recordFrom(ctx context.Context) *callRecord {
	r, _ := ctx.Value(recordKey{}).(*callRecord)
	return r
}

func zapServer(u *remote) zap.Field { return zap.String("mcp_server", u.cfg.Name) }
func zapName(n string) zap.Field    { return zap.String("name", n) }
func zapError(err error) zap.Field  { return zap.String("error", err.Error()) }
