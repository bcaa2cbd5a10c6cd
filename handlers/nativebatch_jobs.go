package handlers

import (
	"context"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// jobAPI is a provider's batch job API in one of its two shapes: calls
// at the provider's base URL (providers.BatchJobs: Anthropic) or a
// driver that stores lines and results itself (providers.BatchDriver:
// Bedrock's S3). The translation of lines and answers, the ledger and
// the engine's side are the same for both (nativeRoute).
type jobAPI interface {
	// oneModel reports whether a job runs one model only.
	oneModel() bool
	// create submits the translated lines as one job of model.
	create(ctx context.Context, model string, lines providers.BatchLines) (string, error)
	get(ctx context.Context, jobID string) (providers.BatchJob, error)
	cancel(ctx context.Context, jobID string) error
	// results returns the ended job's results as JSON lines.
	results(ctx context.Context, jobID string) (io.ReadCloser, error)
	parse(line []byte) (providers.BatchResult, error)
}

// pathJobs is a providers.BatchJobs job API: each call is made with the
// provider's Prepare (op OpProxy), so it carries the target's
// authentication and reaches its base URL or custom host.
type pathJobs struct {
	n    *nativeRoute
	jobs providers.BatchJobs
}

func (p pathJobs) oneModel() bool { return false }

func (p pathJobs) create(ctx context.Context, _ string, lines providers.BatchLines) (string, error) {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(p.jobs.WriteBatchCreate(pw, lines))
	}()
	defer pr.Close()
	status, body, err := p.n.call(ctx, http.MethodPost, p.jobs.BatchPaths("").Create, pr)
	if err != nil {
		return "", err
	}
	if status/100 != 2 {
		return "", p.n.providerError(status, body)
	}
	job, err := p.jobs.ParseBatchJob(body)
	if err != nil {
		return "", apierror.New(http.StatusBadGateway, apierror.TypeUpstream, err.Error())
	}
	return job.ID, nil
}

func (p pathJobs) get(ctx context.Context, jobID string) (providers.BatchJob, error) {
	return p.jobCall(ctx, http.MethodGet, p.jobs.BatchPaths(jobID).Get)
}

func (p pathJobs) cancel(ctx context.Context, jobID string) error {
	_, err := p.jobCall(ctx, http.MethodPost, p.jobs.BatchPaths(jobID).Cancel)
	return err
}

func (p pathJobs) jobCall(ctx context.Context, method, path string) (providers.BatchJob, error) {
	status, body, err := p.n.call(ctx, method, path, nil)
	if err != nil {
		return providers.BatchJob{}, err
	}
	if status/100 != 2 {
		return providers.BatchJob{}, p.n.providerError(status, body)
	}
	job, err := p.jobs.ParseBatchJob(body)
	if err != nil {
		return providers.BatchJob{}, apierror.New(http.StatusBadGateway, apierror.TypeUpstream, err.Error())
	}
	return job, nil
}

func (p pathJobs) results(ctx context.Context, jobID string) (io.ReadCloser, error) {
	res, err := p.n.send(ctx, http.MethodGet, p.jobs.BatchPaths(jobID).Results, nil)
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		defer res.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(res.Body, maxJobAnswer))
		return nil, p.n.providerError(res.StatusCode, body)
	}
	return res.Body, nil
}

func (p pathJobs) parse(line []byte) (providers.BatchResult, error) {
	return p.jobs.ParseBatchResult(line)
}

// driverJobs is a providers.BatchDriver job API.
type driverJobs struct {
	d   providers.BatchDriver
	env providers.BatchEnv
}

func (d *driverJobs) oneModel() bool { return d.d.BatchOneModel() }

func (d *driverJobs) create(ctx context.Context, model string, lines providers.BatchLines) (string, error) {
	env := d.env
	env.Model = model
	return d.d.SubmitBatch(ctx, &env, lines)
}

func (d *driverJobs) get(ctx context.Context, jobID string) (providers.BatchJob, error) {
	return d.d.GetBatch(ctx, &d.env, jobID)
}

func (d *driverJobs) cancel(ctx context.Context, jobID string) error {
	return d.d.CancelBatch(ctx, &d.env, jobID)
}

func (d *driverJobs) results(ctx context.Context, jobID string) (io.ReadCloser, error) {
	return d.d.BatchResults(ctx, &d.env, jobID)
}

func (d *driverJobs) parse(line []byte) (providers.BatchResult, error) {
	return d.d.ParseBatchResult(line)
}

// routeTransport sends a job call through the route's transports and,
// for a target whose addresses come from client input, its egress
// policy, with the request variables (the TLS server name) and the
// replacer the transports read, as for an attempt.
type routeTransport struct{ n *nativeRoute }

// RoundTrip implements http.RoundTripper.
func (rt routeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := rt.n.g
	ctx := context.WithValue(req.Context(), caddyhttp.VarsCtxKey, map[string]any{})
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	guarded := 0
	if rt.n.t.GuardEgress {
		guarded = 1
		ctx = upstream.WithGuard(ctx, g.guard)
	}
	tls := 0
	if req.URL.Scheme == "https" {
		tls = 1
		caddyhttp.SetVar(ctx, upstream.VarServerName, req.URL.Hostname())
	}
	return g.transports[guarded][tls].RoundTrip(req.WithContext(ctx))
}
