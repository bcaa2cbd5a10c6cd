package app

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
)

// Calls inside a connection. Some requests carry many billable calls: a
// realtime session's responses, an MCP client's tools/call messages. Each
// such call passes the limits a model request passes, one by one: the
// route's llm_ratelimit stage (which, in front of such a route, admits
// the connection without counting it and hands its key on, see
// handoff.State.SetAdmission) and the usage limits. AdmitCall is that
// admission, the one implementation both use.

// maxRefusalBody bounds what a stage's refusal may write.
const maxRefusalBody = 64 << 10

// CallRefusal is a call the limits refused, as the stage that refused it
// answered: the HTTP status, the headers it set (Retry-After, the
// x-ratelimit-* headers) and its error in the gateway's envelope.
type CallRefusal struct {
	Status              int
	Header              http.Header
	Type, Code, Message string
}

// AdmitCall admits one call made on behalf of id through the rate-limit
// stage registered under stageKey ("" when no llm_ratelimit was in front
// of the route) and, unless that stage already applied them, the usage
// limits through budget (nil in a build without them: the call is then
// refused while usage limits exist). The stages see the call as a request
// to path with header (its x-gateway-metadata and routing headers are
// matched as a model request's are) and body. Admitted, it returns that
// request, on which the settlements are registered: the caller runs
// observe.RunDone on it with the call's entry once the call is done. It
// is nil, and nothing needs settling, when no limit can apply (no stage,
// no usage limit).
func (a *App) AdmitCall(ctx context.Context, stageKey string, budget BudgetStage, id *identity.Caller,
	path string, header http.Header, body []byte) (*http.Request, *CallRefusal) {
	stage, staged := a.Admission(stageKey)
	if !staged && !a.BudgetEnforcer().Enabled(ctx) {
		// No limit can apply: nothing to admit, nothing to settle.
		return nil, nil
	}
	st := handoff.New(a.Issuer())
	st.SetGiven(id)
	ctx = handoff.With(ctx, st)
	w := &refusalWriter{header: make(http.Header)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm-gateway.internal"+path, bytes.NewReader(body))
	if err != nil {
		return nil, &CallRefusal{Status: http.StatusInternalServerError, Type: apierror.TypeServer,
			Code: "internal_error", Message: "the gateway could not meter the call"}
	}
	if header != nil {
		req.Header = header
	}
	req.RemoteAddr = "127.0.0.1:0"
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, &caddyhttp.Server{})
	if staged && !stage.Admit(w, req, id) {
		return nil, w.refusal()
	}
	if _, done := st.Budgeted(a.Issuer(), id); done {
		return req, nil
	}
	if budget == nil {
		if a.BudgetEnforcer().Enabled(ctx) {
			return nil, &CallRefusal{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable,
				Code: "budget_stage_missing", Message: "usage limits are configured but this build cannot enforce them"}
		}
		return req, nil
	}
	if _, err := budget.AdmitBudget(w.header, req, id, body); err != nil {
		e := apierror.As(err)
		code, _ := e.Code.(string)
		return nil, &CallRefusal{Status: e.Status, Header: w.header, Type: e.Type, Code: code, Message: e.Message}
	}
	return req, nil
}

// refusalWriter keeps what a stage answered when it refused a call.
type refusalWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *refusalWriter) Header() http.Header { return w.header }

func (w *refusalWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *refusalWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if n := maxRefusalBody - w.body.Len(); n < len(p) {
		w.body.Write(p[:max(n, 0)])
		return len(p), nil
	}
	return w.body.Write(p)
}

// refusal reads the stage's answer (the gateway's error envelope).
func (w *refusalWriter) refusal() *CallRefusal {
	e := gjson.GetBytes(w.body.Bytes(), "error")
	ref := &CallRefusal{Status: w.status, Header: w.header, Type: e.Get("type").Str, Code: e.Get("code").Str, Message: e.Get("message").Str}
	if ref.Status == 0 {
		// The call's context ended while the limiter decided.
		ref.Status, ref.Type, ref.Code = 499, apierror.TypeUnavailable, "cancelled"
	}
	if ref.Message == "" {
		ref.Message = "the gateway's limits refused the call"
	}
	if ref.Type == "" {
		ref.Type = apierror.TypeRateLimit
	}
	return ref
}

// LoadBudgetStage loads the usage-limit stage (BudgetStageModule, which
// package ratelimit provides) for a handler that meters requests. A build
// without that package has none (nil, nil): its handlers then refuse
// requests while usage limits exist rather than let them pass unlimited.
func LoadBudgetStage(ctx caddy.Context) (BudgetStage, error) {
	if _, err := caddy.GetModule(BudgetStageModule); err != nil {
		return nil, nil
	}
	m, err := ctx.LoadModuleByID(BudgetStageModule, nil)
	if err != nil {
		return nil, fmt.Errorf("loading the usage-limit stage: %v", err)
	}
	s, ok := m.(BudgetStage)
	if !ok {
		return nil, fmt.Errorf("module %s is not a usage-limit stage", BudgetStageModule)
	}
	return s, nil
}
