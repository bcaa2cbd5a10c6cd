package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/jobs"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// maxProviderBatches is how many of the provider's newest batches a
// merged GET /v1/batches reads (one provider page, OpenAI's maximum).
const maxProviderBatches = 100

// localJobs answers the files, batches and fine-tuning APIs of an
// authenticated request: it checks job requests before any provider
// call, and answers what the gateway keeps (its file store, managed
// batches, the merged batch list); anything else (provider files,
// provider batches, fine-tuning) is not local and is passed through.
func (g *Gateway) localJobs(r *http.Request, q *Request) (*localAnswer, error) {
	area, rest := jobArea(q.Call.Path)
	if area == "" {
		return nil, nil
	}
	if err := jobs.Check(r.Method, q.URLPath, r.URL.Query(), q.Call.Body); err != nil {
		return nil, err
	}
	slug, planErr := g.jobProvider(q)
	id, _, _ := strings.Cut(rest, "/")
	ws := q.Identity.WorkspaceID
	switch area {
	case "fine_tuning":
		if planErr != nil {
			return nil, planErr
		}
		if slug == "" {
			return nil, apierror.BadRequest("provider", "fine-tuning jobs need a single provider target: name it with the %sprovider header, a virtual key or a one-target config", ingress.Prefix).WithCode("unsupported_provider")
		}
		return nil, jobs.CheckFineTuningProvider(slug)
	case "files":
		local := files.IsGatewayID(id) || (id == "" && !jobs.ProviderHasFilesAPI(slug))
		if !local {
			return nil, nil
		}
		return jobAnswer(r, q, "files", func(w http.ResponseWriter, r *http.Request) {
			g.app.Files().ServeFiles(w, r, ws)
		}), nil
	}
	caller := batches.Caller{Name: q.Identity.Name, WorkspaceID: ws, OrganisationID: q.Identity.OrganisationID, Route: g.routeKey}
	if q.Identity.Source == keys.SourceAPI {
		caller.KeyID = q.Identity.KeyID
	}
	// The llm_ratelimit stage that admitted this request, if any: a
	// managed batch's lines pass it too (see Input.Admission).
	caller.Admission = handoff.From(r.Context()).Admission(g.app.Issuer())
	eng := g.app.Batches()
	switch {
	case id == "" && r.Method == http.MethodPost:
		if slug != "" && !batches.UseManaged(slug, q.Call.Body) {
			return nil, nil
		}
	case id == "" && r.Method == http.MethodGet:
		if jobs.ProviderHasBatchAPI(slug) {
			return g.mergedBatchList(r, q, caller)
		}
	case !batches.IsManagedID(id):
		return nil, nil
	}
	return jobAnswer(r, q, "batches", func(w http.ResponseWriter, r *http.Request) {
		eng.ServeBatches(w, r, caller, q.Call.Body)
	}), nil
}

// jobArea splits a path after /v1 into its job API ("files", "batches",
// "fine_tuning") and the rest after it, without slashes; "" for others.
func jobArea(path string) (area, rest string) {
	for _, a := range [...]string{"files", "batches", "fine_tuning"} {
		if r, ok := strings.CutPrefix(path, "/"+a); ok && (r == "" || r[0] == '/') {
			return a, strings.Trim(r, "/")
		}
	}
	return "", ""
}

// jobProvider is the provider slug the request routes to: that of its
// only target, or "" when the routing headers name none, several or an
// invalid plan (then with the plan's error; files and managed batches do
// without, each batch line being routed on its own). The plan is kept
// (routePlan) for the pass-through.
func (g *Gateway) jobProvider(q *Request) (string, error) {
	p, err := g.routePlan(q)
	if err != nil || p == nil {
		return "", err
	}
	if len(p.Leaves) != 1 {
		return "", nil
	}
	return p.Leaves[0].Settings.Provider, nil
}

// jobAnswer is the local answer of a job API's handler; the request it
// serves carries the body parse already read.
func jobAnswer(r *http.Request, q *Request, op providers.Operation, serve func(http.ResponseWriter, *http.Request)) *localAnswer {
	return &localAnswer{op: op, serve: func(w http.ResponseWriter) {
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(q.Call.Body))
		r2.ContentLength = int64(len(q.Call.Body))
		serve(w, r2)
	}}
}

// mergedBatchList answers GET /v1/batches for a provider with a batch
// API: the caller's managed batches and the provider's newest
// maxProviderBatches, newest first, paged by after and limit.
func (g *Gateway) mergedBatchList(r *http.Request, q *Request, caller batches.Caller) (*localAnswer, error) {
	query := r.URL.Query()
	limit, err := jobs.BatchListLimit(query)
	if err != nil {
		return nil, err
	}
	all, err := g.app.Batches().All(r.Context(), caller.WorkspaceID)
	if err != nil {
		return nil, err
	}
	res, err := g.providerBatchList(r, q)
	if err != nil {
		return nil, apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's batch list broke off")
	}
	if res.status/100 != 2 {
		// The provider's error is the answer, as a pass-through would be.
		h := http.Header{"Content-Type": {res.header.Get("Content-Type")}}
		return &localAnswer{op: "batches", held: &heldAnswer{status: res.status, header: h, body: res.body.Bytes()}}, nil
	}
	raw := make(map[*batches.Batch]json.RawMessage)
	var theirs []*batches.Batch
	for _, item := range gjson.GetBytes(res.body.Bytes(), "data").Array() {
		b := &batches.Batch{}
		if json.Unmarshal([]byte(item.Raw), b) != nil || b.ID == "" {
			continue
		}
		raw[b] = json.RawMessage(item.Raw)
		theirs = append(theirs, b)
	}
	page := pageBatches(mergeNewestFirst(all, theirs), query.Get("after"), limit)
	data := make([]json.RawMessage, len(page.Data))
	for i, b := range page.Data {
		if data[i] = raw[b]; data[i] == nil {
			data[i] = b.JSON()
		}
	}
	body, err := json.Marshal(struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{"list", data, page.FirstID, page.LastID, page.HasMore})
	if err != nil {
		return nil, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	return &localAnswer{op: "batches", held: &heldAnswer{status: http.StatusOK, header: h, body: body}}, nil
}

// providerBatchList asks the provider q routes to for its newest
// maxProviderBatches batches: q's route (its plan, headers and caller)
// with the call GET /v1/batches, run through plan and run directly, so
// it is a provider call and never this local answer again. It is logged
// as a request of its own; its answer is held in memory, uncompressed.
func (g *Gateway) providerBatchList(r *http.Request, q *Request) (*memoryWriter, error) {
	w := &memoryWriter{header: make(http.Header), max: g.MaxResponseBody}
	r2 := r.Clone(r.Context())
	r2.Method, r2.URL.Path, r2.URL.RawQuery = http.MethodGet, "/v1/batches", "limit="+strconv.Itoa(maxProviderBatches)
	r2.Header = plainHeader(q.ClientHeader)
	r2.Body, r2.ContentLength = http.NoBody, 0
	// Variables, placeholders and log fields of its own, not the
	// client's request's.
	r2 = caddyhttp.PrepareRequest(r2, caddy.NewReplacer(), w, &caddyhttp.Server{})
	q2 := &Request{Header: q.Header, RouteHeader: q.RouteHeader, Identity: q.Identity, URLPath: r2.URL.Path, ClientHeader: r2.Header, Plan: q.Plan}
	q2.Call = providers.Call{Op: providers.OpProxy, Method: r2.Method, Path: "/batches", RawQuery: r2.URL.RawQuery, Header: r2.Header}
	f := g.startFlight(w, r2)
	f.setHeader(q.Header)
	f.q = q2
	g.endFlight(r2, f, g.route(r2, q2, f))
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if (f.res != nil && f.res.abort) || w.overflow {
		return w, ErrIncomplete
	}
	return w, nil
}

// mergeNewestFirst merges the managed batches (newest first, as All
// returns them) with a provider's list, keeping the order of each: the
// provider's list is in its own order, which its second-resolution
// created_at cannot recover (batches created in one second would be
// reordered by any sort). A provider batch goes before the managed ones
// only when it is newer; within one second managed batches come first.
func mergeNewestFirst(ours, theirs []*batches.Batch) []*batches.Batch {
	out := make([]*batches.Batch, 0, len(ours)+len(theirs))
	i, j := 0, 0
	for i < len(ours) && j < len(theirs) {
		if theirs[j].CreatedAt > ours[i].CreatedAt {
			out = append(out, theirs[j])
			j++
		} else {
			out = append(out, ours[i])
			i++
		}
	}
	out = append(out, ours[i:]...)
	return append(out, theirs[j:]...)
}

// pageBatches returns the page of sorted bs after the batch after (from
// the start when after is unknown or empty), at most limit long.
func pageBatches(bs []*batches.Batch, after string, limit int) *batches.Page {
	start := 0
	if after != "" {
		for i, b := range bs {
			if b.ID == after {
				start = i + 1
				break
			}
		}
	}
	end := min(start+limit, len(bs))
	p := &batches.Page{Object: "list", Data: bs[start:end], HasMore: end < len(bs)}
	if len(p.Data) > 0 {
		p.FirstID, p.LastID = &p.Data[0].ID, &p.Data[len(p.Data)-1].ID
	}
	return p
}

// batchRunner runs managed batch lines through the gateway's whole
// pipeline as the batch's creator.
type batchRunner struct{ g *Gateway }

// Run implements batches.Runner. A caller whose gateway key is no longer
// configured runs nothing: batches.ErrCallerRevoked stops its batch.
func (b batchRunner) Run(ctx context.Context, c batches.Caller, method, path string, header http.Header, body []byte) (int, []byte, error) {
	id, ok := b.g.app.Caller(c)
	if !ok {
		return 0, nil, batches.ErrCallerRevoked
	}
	res, err := b.g.Run(ctx, &Input{Method: method, Path: path, Header: plainHeader(header), Body: body, Identity: id, Admission: c.Admission,
		Charge: batches.ChargeOf(ctx)})
	if err != nil {
		return 0, nil, err
	}
	return res.Status, res.Body, nil
}

// plainHeader is h without Accept-Encoding, so answers held in memory
// (batch results, a provider list to merge) arrive uncompressed.
func plainHeader(h http.Header) http.Header {
	h = h.Clone()
	h.Del("Accept-Encoding")
	return h
}
