package handlers

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Input is a request run through the pipeline without an HTTP client, as
// managed batches do: the same headers (x-gateway-api-key included) and
// body a client would send to Path ("/v1/chat/completions").
type Input struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Identity, when set, is the caller, already authenticated (a
	// managed batch's creator): the request runs as it without a
	// gateway key, since batches store no secrets.
	Identity *identity.Caller
	// Admission, when set, names the rate-limit stage (app.Admission)
	// the request passes before the pipeline, as a client's request
	// passes llm_ratelimit: a refusal is the answer, and token policies
	// are settled when the request is done. It needs Identity.
	Admission string
	// Charge, when set, is the managed batch line this request runs: it
	// is charged only if no other run of the line was (claimCharge).
	Charge *batches.Charge
}

// Result is the complete answer to an Input.
type Result struct {
	Status int
	Header http.Header
	Body   []byte
	// TraceID, Provider, Model and Usage are what the request's log entry
	// records.
	TraceID  string
	Provider string
	Model    string
	Usage    *providers.Usage
}

// ErrIncomplete is returned by Run when the answer broke off after it
// began (a passed-through answer whose provider connection failed).
var ErrIncomplete = errors.New("the answer broke off before it completed")

// Run runs one request through the whole pipeline (authentication,
// stages, routing, retries, cache, provider translation) and returns the
// answer it would have sent, held in memory up to max_response_body. The
// request is logged as any other. ctx bounds the request; its values are
// not used. The error is only for an answer that broke off; gateway and
// provider errors are answers, in the envelope, with their status.
func (g *Gateway) Run(ctx context.Context, in *Input) (*Result, error) {
	w := &memoryWriter{header: make(http.Header), max: g.MaxResponseBody}
	f, err := g.runInput(ctx, in, w)
	if err != nil {
		return nil, err
	}
	out := &Result{Status: w.status, Header: w.header, Body: w.body.Bytes()}
	if f == nil {
		if out.Status == 0 {
			// The request's context ended while the limiter decided.
			return nil, ctx.Err()
		}
		return out, nil
	}
	out.TraceID, out.Provider, out.Model, out.Usage = f.entry.TraceID, f.entry.Provider, f.entry.Model, f.entry.Usage
	if out.Status == 0 {
		out.Status = http.StatusOK
	}
	if (f.res != nil && f.res.abort) || w.overflow {
		return out, ErrIncomplete
	}
	return out, nil
}

// runInput runs in through the whole pipeline as Run does, answered into
// w as it is written (a Responses WebSocket streams it to its socket).
// The flight is nil when the admission stage refused the request; its
// answer is then in w.
func (g *Gateway) runInput(ctx context.Context, in *Input, w http.ResponseWriter) (*flight, error) {
	method := in.Method
	if method == "" {
		method = http.MethodPost
	}
	if in.Identity != nil {
		// The run is its creator's: the gateway takes the caller given
		// (handoff.State.Given) and presents no key for it.
		st := handoff.New(g.app.Issuer())
		st.SetGiven(in.Identity)
		ctx = handoff.With(ctx, st)
	}
	req, err := clientlessRequest(ctx, method, in.Path, in.Header.Clone(), in.Body, w)
	if err != nil {
		return nil, err
	}
	if in.Charge != nil {
		// A variable of this request, not a context value: requests it
		// makes itself (the semantic cache's embeddings) are not the line.
		caddyhttp.SetVar(req.Context(), chargeVar, in.Charge)
	}
	if stage, ok := g.app.Admission(in.Admission); ok && in.Identity != nil {
		if !stage.Admit(w, req, in.Identity) {
			return nil, nil
		}
	}
	return g.serveFlight(w, req), nil
}

// clientlessRequest builds the request of a call no HTTP client made (Run,
// the semantic cache's embeddings) to path ("/v1/embeddings"), answered
// into w. It gets a Caddy server of its own: no access log, so the
// gateway writes its own entry; no client address to trust; and its own
// replacer, in which attempts record the address they dial.
func clientlessRequest(ctx context.Context, method, path string, header http.Header, body []byte, w http.ResponseWriter) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://llm-gateway.internal"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if header != nil {
		req.Header = header
	}
	req.RemoteAddr = "127.0.0.1:0"
	return caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, &caddyhttp.Server{}), nil
}

// chargeVar carries Input.Charge.
const chargeVar = "llm_gateway.batch_charge"

// claimCharge marks the entry of a managed batch line with the line, so
// the ledger keeps one record per line, and claims the line's charge
// before the entry is recorded and settled (endFlight): a run of a line
// that another run already charged (a line run again after another
// instance took its batch over) is marked ChargeDuplicate, and the ledger
// and the rate and usage limits charge it nothing. The first run to
// finish is the one charged. A claim that cannot be made (the store is
// down) charges the run, the ledger's unique key still keeping one record.
func (g *Gateway) claimCharge(r *http.Request, f *flight) {
	ch, _ := caddyhttp.GetVar(r.Context(), chargeVar).(*batches.Charge)
	if ch == nil {
		return
	}
	f.entry.BatchID, f.entry.CustomID = ch.BatchID, ch.CustomID
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), claimTimeout)
	defer cancel()
	first, err := ch.Claim(ctx)
	if err != nil {
		g.logger.Warn("batch line: recording its charge failed; it is charged", zap.String("batch_id", ch.BatchID), zap.Error(err))
		return
	}
	f.entry.ChargeDuplicate = !first
}

// claimTimeout bounds a batch line's charge claim.
const claimTimeout = 5 * time.Second

// authenticate returns the caller of r: the one Run was given, else the
// holder of the presented gateway key, as llm_ratelimit in front of the
// gateway already found it or as the app finds it now.
func (g *Gateway) authenticate(r *http.Request, presented string) (*identity.Caller, bool) {
	return g.app.Identify(r.Context(), presented)
}

// memoryWriter is the in-memory client of Run.
type memoryWriter struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	max      int64
	overflow bool
}

func (m *memoryWriter) Header() http.Header { return m.header }

func (m *memoryWriter) WriteHeader(status int) {
	if m.status == 0 {
		m.status = status
	}
}

func (m *memoryWriter) Write(p []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	if int64(m.body.Len()+len(p)) > m.max {
		m.overflow = true
		return 0, errResponseTooLarge
	}
	return m.body.Write(p)
}

// Flush implements http.Flusher; there is nothing to flush.
func (m *memoryWriter) Flush() {}
