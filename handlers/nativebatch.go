package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Batch modes of a route (Gateway.BatchMode).
const (
	BatchNative  = "native"
	BatchManaged = "managed"
)

// Bounds of a native batch's calls to its provider's job API.
const (
	// maxJobAnswer bounds a job object (create, get, cancel answers).
	maxJobAnswer = 1 << 20
	// jobCallTimeout bounds a get or cancel; a create or a results read
	// is bounded by the size of the batch, not by time.
	jobCallTimeout = time.Minute
)

var _ batches.NativeRunner = batchRunner{}

// nativeRoute is a batch's route resolved to its one target.
type nativeRoute struct {
	g      *Gateway
	id     *identity.Caller
	hdr    *ingress.Headers
	header http.Header
	plan   *routing.Plan
	t      *routing.Target
	prov   providers.Provider
	api    jobAPI
}

// resolveNative resolves the route of caller's batch batchID with header
// to its one target, when that target can take the batch natively: a
// provider with a job API (and, for a driver, the storage it needs set),
// no prompt to render per line and no hooks (which judge each answer
// before it is delivered, and a job's answers are delivered by the
// provider all at once). ok is false otherwise.
func (b batchRunner) resolveNative(c batches.Caller, header http.Header, batchID string) (n *nativeRoute, ok bool, err error) {
	id, found := b.g.app.Caller(c)
	if !found {
		return nil, false, batches.ErrCallerRevoked
	}
	header = header.Clone()
	hdr, err := ingress.Parse(header)
	if err != nil {
		return nil, false, err
	}
	b.g.asCreator(hdr, header, id)
	q := &Request{Header: hdr, RouteHeader: hdr, Identity: id}
	plan, err := b.g.routePlan(q)
	if err != nil || plan == nil || len(plan.Leaves) != 1 {
		return nil, false, err
	}
	t := plan.Leaves[0]
	prov, found := providers.Lookup(t.Settings.Provider)
	if !found || t.PromptID != "" || hooked(t) {
		return nil, false, nil
	}
	n = &nativeRoute{g: b.g, id: id, hdr: hdr, header: header, plan: plan, t: t, prov: prov}
	switch jobs := prov.(type) {
	case providers.BatchJobs:
		n.api = pathJobs{n: n, jobs: jobs}
	case providers.BatchDriver:
		if !jobs.BatchReady(&t.Settings) {
			return nil, false, nil
		}
		env := providers.BatchEnv{Settings: &t.Settings, Name: batchID, HTTP: &http.Client{Transport: routeTransport{n}}, Error: n.providerError}
		if t.GuardEgress {
			env.Egress = b.g.guard
		}
		n.api = &driverJobs{d: jobs, env: env}
	default:
		return nil, false, nil
	}
	return n, true, nil
}

// NativeProvider implements batches.NativeRunner: chat completion batches
// of a route in batch_mode native whose one target's provider has a job
// API.
func (b batchRunner) NativeProvider(c batches.Caller, header http.Header, endpoint string) string {
	if b.g.BatchMode == BatchManaged || endpoint != "/v1/chat/completions" {
		return ""
	}
	n, ok, _ := b.resolveNative(c, header, "")
	if !ok {
		return ""
	}
	return n.t.Settings.Provider
}

// NativeJobs implements batches.NativeRunner.
func (b batchRunner) NativeJobs(_ context.Context, c batches.Caller, header http.Header, provider, batchID string) (batches.NativeJobs, error) {
	n, ok, err := b.resolveNative(c, header, batchID)
	switch {
	case err != nil:
		return nil, err
	case !ok || n.t.Settings.Provider != provider:
		return nil, fmt.Errorf("the batch's route no longer reaches %s with one target", provider)
	}
	return n, nil
}

// lineCall plans one batch line exactly as the same on-demand chat
// completion is planned (override_params, the key's model allow-list)
// and prepares its upstream request with the provider's translation.
func (n *nativeRoute) lineCall(body []byte) (providers.Call, []byte, error) {
	q := &Request{Header: n.hdr, RouteHeader: n.hdr, Identity: n.id, Plan: n.plan, ClientHeader: n.header, URLPath: "/v1/chat/completions"}
	q.Call = providers.Call{Op: providers.OpChat, Method: http.MethodPost, Path: "/chat/completions", Header: n.header, Body: body}
	if err := checkJSONObject(body); err != nil {
		return q.Call, nil, err
	}
	q.Call.Model, _ = readModelStream(body)
	if err := checkModel(n.id, &q.Call); err != nil {
		return q.Call, nil, err
	}
	if err := n.g.planAttempts(context.Background(), q, nil, false); err != nil {
		return q.Call, nil, err
	}
	p := &q.attempts[0]
	if p.err != nil {
		return q.Call, nil, p.err
	}
	// A job's lines are answered whole: none streams.
	call := p.call(q)
	call.Stream = false
	if n.t.GuardEgress {
		call.Egress = n.g.guard
	}
	u := providers.Upstream{Header: make(http.Header, 4)}
	if err := n.prov.Prepare(&call, &n.t.Settings, &u); err != nil {
		return call, nil, err
	}
	return call, u.Body, nil
}

// Submit implements batches.NativeJobs. For a job API that runs one
// model, the lines of another model than the first translated line's are
// refused (batch_model_mismatch), each in the error file.
func (n *nativeRoute) Submit(ctx context.Context, lines providers.BatchLines, reject func(id string, err error)) (string, error) {
	submitted := 0
	model := ""
	translated := func(fn func(id string, body []byte) error) error {
		return lines(func(id string, body []byte) error {
			call, up, err := n.lineCall(body)
			if err == nil && n.api.oneModel() {
				if model == "" {
					model = call.Model
				} else if call.Model != model {
					err = apierror.BadRequest("model", "this batch runs as one %s job of model %s, the model of its first request: send requests for %s in a batch of their own",
						n.t.Settings.Provider, model, call.Model).WithCode("batch_model_mismatch")
				}
			}
			if err != nil {
				reject(id, apierror.As(err))
				return nil
			}
			submitted++
			return fn(id, up)
		})
	}
	// A dry pass first: a batch whose every line is refused creates no
	// job, and the create is not sent with an empty list.
	if err := translated(func(string, []byte) error { return nil }); err != nil {
		return "", err
	}
	if submitted == 0 {
		return "", nil
	}
	reject = func(string, error) {} // each was given on the dry pass
	return n.api.create(ctx, model, translated)
}

// Get implements batches.NativeJobs.
func (n *nativeRoute) Get(ctx context.Context, jobID string) (providers.BatchJob, error) {
	ctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	defer cancel()
	return n.api.get(ctx, jobID)
}

// Cancel implements batches.NativeJobs.
func (n *nativeRoute) Cancel(ctx context.Context, jobID string) error {
	ctx, cancel := context.WithTimeout(ctx, jobCallTimeout)
	defer cancel()
	return n.api.cancel(ctx, jobID)
}

// Results implements batches.NativeJobs: the results read a line at a
// time (each at most max_response_body), each answer translated by the
// provider's translator as its on-demand answer is.
func (n *nativeRoute) Results(ctx context.Context, jobID string, fn func(*batches.NativeResult) error) error {
	body, err := n.api.results(ctx, jobID)
	if err != nil {
		return err
	}
	defer body.Close()
	tr := n.prov.Translator(providers.OpChat)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), int(min(n.g.MaxResponseBody, 1<<30)))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		r, err := n.api.parse(line)
		if err != nil {
			n.g.logger.Warn("native batch: a result line could not be read", zap.String("job_id", jobID), zap.Error(err))
			continue
		}
		out := &batches.NativeResult{BatchResult: r}
		n.translate(tr, out)
		if err := fn(out); err != nil {
			return err
		}
	}
	return sc.Err()
}

// translate turns a result's provider body into OpenAI's: a chat
// completion, or the error envelope with the provider's message; a
// success the translator refuses is a 502 in the error file. Answered
// lines get their ledger record.
func (n *nativeRoute) translate(tr providers.Translator, r *batches.NativeResult) {
	if r.Kind != providers.BatchSucceeded && r.Kind != providers.BatchErrored {
		return
	}
	call := providers.Call{Op: providers.OpChat, Method: http.MethodPost, Path: "/chat/completions", Header: n.header,
		Model: gjson.GetBytes(r.Body, "model").Str}
	var usage *providers.Usage
	errType := ""
	if r.Kind == providers.BatchSucceeded {
		body, u, err := tr.Response(&call, r.Body)
		if err != nil {
			r.Kind, r.Status = providers.BatchErrored, http.StatusBadGateway
			r.Body = apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "provider %s sent an answer the gateway could not read", n.t.Settings.Provider).Body()
		} else {
			r.Body, usage = body, u
		}
	} else {
		errType = string(providers.Classify(n.prov, r.Status, nil, r.Body))
		r.Body = tr.Error(&call, r.Status, r.Body)
	}
	status := r.Status
	r.Record = func(ctx context.Context, ch *batches.Charge, model string) {
		n.record(ctx, ch, n.sentModel(model), status, usage, errType)
	}
}

// sentModel is the model a line asking for model was sent with, the
// one its on-demand request's ledger record names: the target's
// override_params model, if any, else the line's.
func (n *nativeRoute) sentModel(model string) string {
	if raw, ok := n.t.OverrideParams["model"]; ok {
		var m string
		if json.Unmarshal(raw, &m) == nil && m != "" {
			return m
		}
	}
	return model
}

// record writes one answered line's ledger record, flagged with its
// batch and custom_id and priced at the provider's batch price, logs it
// and charges the caller's usage limits for it, as the line's own
// request would have been.
func (n *nativeRoute) record(ctx context.Context, ch *batches.Charge, model string, status int, usage *providers.Usage, errType string) {
	slug := n.t.Settings.Provider
	e := observe.Entry{TraceID: n.hdr.TraceID, KeyName: n.id.Name, Workspace: n.id.WorkspaceID, Organisation: n.id.OrganisationID,
		VirtualKey: n.t.VirtualKey, Operation: providers.OpChat, Method: http.MethodPost, Path: "/v1/chat/completions",
		Provider: slug, Model: model, Status: status, Start: time.Now(), Usage: usage, Metadata: n.hdr.Metadata,
		ErrorType: errType, BatchID: ch.BatchID, CustomID: ch.CustomID}
	if e.TraceID == "" {
		e.TraceID = newTraceID()
	}
	if usage != nil {
		e.CostUSD, e.CostKnown = n.g.app.Prices().BatchCost(slug, model, *usage)
	}
	w := &memoryWriter{header: make(http.Header), max: maxJobAnswer}
	// The usage limits describe the line as llm_ratelimit describes a
	// request: its routing headers and model. Its reservation is settled
	// at once with what the line used.
	quoted, _ := json.Marshal(model)
	body := []byte(`{"model":` + string(quoted) + `,"max_tokens":1,"messages":[]}`)
	r, err := clientlessRequest(context.WithoutCancel(ctx), http.MethodPost, "/v1/chat/completions", n.header.Clone(), body, w)
	if err == nil && n.g.budget != nil && usage != nil {
		if _, err := n.g.budget.AdmitBudget(w.header, r, n.id, body); err != nil {
			n.g.logger.Warn("native batch: a line's usage limit refused its charge (the limit is spent); the line is in the ledger",
				zap.String("batch_id", ch.BatchID), zap.Error(err))
		}
	}
	n.g.app.UsageLedger().Record(&e)
	if r != nil {
		e.Log(r, n.g.logger)
		observe.RunDone(r, &e)
	}
}

// providerError is a job call's non-2xx answer as an *apierror.Error
// with the provider's status and message.
func (n *nativeRoute) providerError(status int, body []byte) error {
	tr := n.prov.Translator(providers.OpChat)
	msg := ""
	if tr != nil {
		msg = gjson.GetBytes(tr.Error(&providers.Call{Op: providers.OpChat}, status, body), "error.message").Str
	}
	if msg == "" {
		msg = fmt.Sprintf("answered %d", status)
	}
	return apierror.Newf(status, apierror.TypeUpstream, "provider %s: %s", n.t.Settings.Provider, msg)
}

// call sends one job call and reads its answer, at most maxJobAnswer.
func (n *nativeRoute) call(ctx context.Context, method, path string, body io.Reader) (int, []byte, error) {
	res, err := n.send(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxJobAnswer+1))
	if err != nil {
		return 0, nil, err
	}
	if len(b) > maxJobAnswer {
		return 0, nil, errors.New("the provider's job answer is too large")
	}
	return res.StatusCode, b, nil
}

// send makes a job call to the target's base URL (or custom host) with
// the headers the provider's Prepare sets for it (its authentication),
// through the route's transports and, for a target whose address comes
// from client input, its egress policy.
func (n *nativeRoute) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	c := providers.Call{Op: providers.OpProxy, Method: method, Path: path, Header: n.header}
	if n.t.GuardEgress {
		c.Egress = n.g.guard
	}
	u := providers.Upstream{Header: make(http.Header, 4)}
	if err := n.prov.Prepare(&c, &n.t.Settings, &u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, u.Method, u.URL.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range u.Header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header["User-Agent"] = noUserAgent
	return routeTransport{n}.RoundTrip(req)
}
