package batches

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/jobs"
)

// Defaults of Config.
const (
	// DefaultConcurrency is how many lines of one batch run at once.
	DefaultConcurrency = 8
	// DefaultGlobalConcurrency is how many lines of all batches of the
	// process run at once, so many batches cannot flood the providers.
	DefaultGlobalConcurrency = 64
	// DefaultMaxLines is OpenAI's limit of requests per batch.
	DefaultMaxLines = 50000
	// DefaultCheckpointEvery is how many finished lines are written to
	// storage at once; a restart re-runs at most this many lines.
	DefaultCheckpointEvery = 100
	// Window is how long a batch may run before it expires, for both
	// completion windows.
	Window = 24 * time.Hour
)

// Config configures an Engine.
type Config struct {
	// KV is the storage of batch records (required).
	KV files.KV
	// Files stores input, output and error files (required).
	Files *files.Store
	// Prefix is the storage key prefix (default "llm_gateway/batches").
	Prefix string
	// Instance identifies this process (caddy.InstanceID); only its own
	// unfinished batches are resumed at Start.
	Instance string
	// Concurrency, GlobalConcurrency, MaxLines and CheckpointEvery
	// default to the constants above.
	Concurrency       int
	GlobalConcurrency int
	MaxLines          int
	CheckpointEvery   int
	// Now replaces time.Now (tests drive expiry with it).
	Now func() time.Time
	// Logger receives operational events; never request contents.
	Logger *zap.Logger
}

// Engine creates, runs, lists and cancels managed batches.
type Engine struct {
	cfg    Config
	global chan struct{}

	mu      sync.Mutex
	runner  Runner
	ready   chan struct{} // closed at the first SetRunner
	running map[string]*job

	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
}

// job is a batch running on this engine. rec is guarded by Engine.mu.
type job struct {
	rec       *record
	memHeader http.Header
	input     []byte // nil when it must be read from the store
	cancel    chan struct{}
	cancelled bool
}

// NewEngine returns an engine; call SetRunner and Start before use.
func NewEngine(cfg Config) *Engine {
	if cfg.Prefix == "" {
		cfg.Prefix = "llm_gateway/batches"
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.GlobalConcurrency <= 0 {
		cfg.GlobalConcurrency = DefaultGlobalConcurrency
	}
	if cfg.MaxLines <= 0 {
		cfg.MaxLines = DefaultMaxLines
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = DefaultCheckpointEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Engine{
		cfg: cfg, global: make(chan struct{}, cfg.GlobalConcurrency), ready: make(chan struct{}),
		running: map[string]*job{}, ctx: ctx, stop: stop,
	}
}

// SetRunner installs the pipeline lines run through. Each newly
// provisioned handler may install its own; lines dispatched afterwards
// use the newest.
func (e *Engine) SetRunner(r Runner) {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := e.runner == nil
	e.runner = r
	if first && r != nil {
		close(e.ready)
	}
}

// currentRunner waits for a runner (resumed batches may start before the
// handler provisioned one) or the engine's end.
func (e *Engine) currentRunner() (Runner, bool) {
	select {
	case <-e.ready:
	case <-e.ctx.Done():
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runner, true
}

// Start resumes this instance's unfinished batches; later calls do
// nothing. See resume for what happens to each.
func (e *Engine) Start() {
	e.startOnce.Do(func() {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.resume()
		}()
	})
}

// Stop ends every running batch's dispatch and waits for it. Lines in
// flight are abandoned (their results are not recorded) and the batches
// stay unfinished in storage, for the next Start to resume.
func (e *Engine) Stop() {
	e.stop()
	e.wg.Wait()
}

func (e *Engine) key(workspace, id string) string {
	return files.WorkspaceDir(e.cfg.Prefix, workspace) + "/" + id + ".json"
}

func (e *Engine) partsDir(workspace, id string) string {
	return files.WorkspaceDir(e.cfg.Prefix, workspace) + "/" + id + ".parts"
}

func (e *Engine) save(ctx context.Context, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return e.cfg.KV.Store(ctx, e.key(rec.Caller.WorkspaceID, rec.Batch.ID), b)
}

func (e *Engine) loadKey(ctx context.Context, key string) (*record, error) {
	b, err := e.cfg.KV.Load(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := jsonlimit.Object(b); err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

func notFound(id string) *apierror.Error {
	return apierror.Newf(http.StatusNotFound, apierror.TypeInvalidRequest, "No batch found with id %s.", apierror.QuoteID(id)).WithCode("not_found")
}

func storeFailure() *apierror.Error {
	return apierror.New(http.StatusInternalServerError, apierror.TypeServer, "the gateway could not read its batch store")
}

// Create validates a POST /v1/batches body, reads the input file and
// starts the batch; it returns the batch in status validating. header is
// the creation request's headers (see SplitHeader for what is stored).
// The input file is a gateway file (files.IsGatewayID) or, for providers
// with a files API, fetched through the runner with GET
// /v1/files/{id}/content.
func (e *Engine) Create(ctx context.Context, caller Caller, header http.Header, body []byte) (*Batch, error) {
	if err := jobs.CheckBatchCreate(body); err != nil {
		return nil, err
	}
	obj := gjson.ParseBytes(body)
	persist, memory := SplitHeader(header)
	input, err := e.readInput(ctx, caller, mergeHeader(persist, memory), obj.Get("input_file_id").Str)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Now().Unix()
	b := Batch{
		ID: IDPrefix + randHex(16), Object: "batch", Endpoint: obj.Get("endpoint").Str,
		InputFileID: obj.Get("input_file_id").Str, CompletionWindow: obj.Get("completion_window").Str,
		Status: StatusValidating, CreatedAt: now, ExpiresAt: ptr(now + int64(Window/time.Second)),
	}
	if md := obj.Get("metadata"); md.IsObject() {
		b.Metadata = map[string]string{}
		md.ForEach(func(k, v gjson.Result) bool { b.Metadata[k.Str] = v.Str; return true })
	}
	rec := &record{Batch: b, Caller: caller, Instance: e.cfg.Instance, Header: persist, Resumable: len(memory) == 0}
	if err := e.save(ctx, rec); err != nil {
		return nil, apierror.New(http.StatusInternalServerError, apierror.TypeServer, "the gateway could not store the batch")
	}
	j := &job{rec: rec, memHeader: memory, input: input, cancel: make(chan struct{})}
	snap := rec.Batch.clone()
	e.launch(j)
	return snap, nil
}

func (e *Engine) readInput(ctx context.Context, caller Caller, header http.Header, id string) ([]byte, error) {
	if files.IsGatewayID(id) {
		content, f, err := e.cfg.Files.Content(ctx, caller.WorkspaceID, id)
		if err != nil {
			if ae := new(apierror.Error); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				return nil, apierror.BadRequest("input_file_id", "input_file_id %s was not found", apierror.QuoteID(id)).WithCode("not_found")
			}
			return nil, err
		}
		if f.Purpose != files.PurposeBatch {
			return nil, apierror.BadRequest("input_file_id", "input_file_id %s must be a file uploaded with purpose 'batch'", apierror.QuoteID(id))
		}
		return content, nil
	}
	e.mu.Lock()
	r := e.runner
	e.mu.Unlock()
	if r == nil || !apierrorIDShaped(id) {
		return nil, apierror.BadRequest("input_file_id", "input_file_id %s was not found", apierror.QuoteID(id)).WithCode("not_found")
	}
	h := header.Clone()
	h.Del("Content-Type")
	status, content, err := r.Run(ctx, caller, http.MethodGet, "/v1/files/"+id+"/content", h, nil)
	if err != nil || status != http.StatusOK {
		return nil, apierror.BadRequest("input_file_id", "input_file_id %s could not be read from the provider", apierror.QuoteID(id))
	}
	if int64(len(content)) > e.cfg.Files.MaxBytes() {
		return nil, files.TooLarge(e.cfg.Files.MaxBytes())
	}
	return content, nil
}

func apierrorIDShaped(id string) bool { return apierror.IDShaped(id) }

// launch registers j as running and starts its driver.
func (e *Engine) launch(j *job) {
	e.mu.Lock()
	e.running[j.rec.Batch.ID] = j
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.drive(j)
		e.mu.Lock()
		delete(e.running, j.rec.Batch.ID)
		e.mu.Unlock()
	}()
}

// snapshot returns the live state of a batch running here.
func (e *Engine) snapshot(id, workspace string) (*Batch, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j, ok := e.running[id]
	if !ok || j.rec.Caller.WorkspaceID != workspace {
		return nil, false
	}
	return j.rec.Batch.clone(), true
}

// Get returns the batch id of workspace: the live state when it runs
// here, else the stored one; a 404 apierror when unknown.
func (e *Engine) Get(ctx context.Context, workspace, id string) (*Batch, error) {
	if !IsManagedID(id) {
		return nil, notFound(id)
	}
	if b, ok := e.snapshot(id, workspace); ok {
		return b, nil
	}
	rec, err := e.loadKey(ctx, e.key(workspace, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, storeFailure()
	}
	if rec.Caller.WorkspaceID != workspace || rec.Batch.ID != id {
		return nil, notFound(id)
	}
	return &rec.Batch, nil
}

// Cancel moves a batch to cancelling: no new line starts, running lines
// finish, then the batch is cancelled with partial results. A batch
// running on another instance is marked in storage and its engine picks
// the mark up at its next checkpoint. Terminal batches give a 400.
func (e *Engine) Cancel(ctx context.Context, workspace, id string) (*Batch, error) {
	if !IsManagedID(id) {
		return nil, notFound(id)
	}
	e.mu.Lock()
	if j, ok := e.running[id]; ok && j.rec.Caller.WorkspaceID == workspace {
		b := &j.rec.Batch
		if !Terminal(b.Status) && b.Status != StatusCancelling && b.Status != StatusFinalizing {
			b.Status, b.CancellingAt = StatusCancelling, ptr(e.cfg.Now().Unix())
			if !j.cancelled {
				j.cancelled = true
				close(j.cancel)
			}
		}
		snap := b.clone()
		e.mu.Unlock()
		if snap.Status != StatusCancelling {
			return nil, cannotCancel(snap.Status)
		}
		return snap, nil
	}
	e.mu.Unlock()
	rec, err := e.loadKey(ctx, e.key(workspace, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, storeFailure()
	}
	if rec.Caller.WorkspaceID != workspace {
		return nil, notFound(id)
	}
	switch rec.Batch.Status {
	case StatusCancelling:
		return &rec.Batch, nil
	case StatusValidating, StatusInProgress:
		rec.Batch.Status, rec.Batch.CancellingAt = StatusCancelling, ptr(e.cfg.Now().Unix())
		if err := e.save(ctx, rec); err != nil {
			return nil, storeFailure()
		}
		return &rec.Batch, nil
	}
	return nil, cannotCancel(rec.Batch.Status)
}

func cannotCancel(status string) *apierror.Error {
	return apierror.Newf(http.StatusBadRequest, apierror.TypeInvalidRequest, "Cannot cancel a batch with status '%s'.", status)
}

// ListParams are GET /v1/batches' query parameters.
type ListParams struct {
	After string
	Limit int
}

// Page is OpenAI's batch list.
type Page struct {
	Object  string   `json:"object"`
	Data    []*Batch `json:"data"`
	FirstID *string  `json:"first_id"`
	LastID  *string  `json:"last_id"`
	HasMore bool     `json:"has_more"`
}

// List returns the workspace's managed batches, newest first, the page
// after the batch After, at most Limit (default 20). It reads every
// batch record of the workspace.
func (e *Engine) List(ctx context.Context, workspace string, p ListParams) (*Page, error) {
	all, err := e.All(ctx, workspace)
	if err != nil {
		return nil, err
	}
	if p.After != "" {
		for i, b := range all {
			if b.ID == p.After {
				all = all[i+1:]
				break
			}
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = jobs.DefaultListLimit
	}
	page := &Page{Object: "list", Data: all}
	if len(all) > limit {
		page.Data, page.HasMore = all[:limit], true
	}
	if page.Data == nil {
		page.Data = []*Batch{}
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = ptr(page.Data[0].ID), ptr(page.Data[n-1].ID)
	}
	return page, nil
}

// All returns every managed batch of the workspace, newest first, with
// live state for those running here; the handler merges provider batches
// into it.
func (e *Engine) All(ctx context.Context, workspace string) ([]*Batch, error) {
	keys, err := files.ListKeys(ctx, e.cfg.KV, files.WorkspaceDir(e.cfg.Prefix, workspace), false)
	if err != nil {
		return nil, storeFailure()
	}
	var all []*Batch
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		rec, err := e.loadKey(ctx, k)
		if err != nil || rec.Caller.WorkspaceID != workspace {
			continue
		}
		if live, ok := e.snapshot(rec.Batch.ID, workspace); ok {
			all = append(all, live)
		} else {
			all = append(all, &rec.Batch)
		}
	}
	SortNewestFirst(all)
	return all, nil
}

// SortNewestFirst orders batches by created_at descending, then id, the
// order of every batch list.
func SortNewestFirst(bs []*Batch) {
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].CreatedAt != bs[j].CreatedAt {
			return bs[i].CreatedAt > bs[j].CreatedAt
		}
		return bs[i].ID > bs[j].ID
	})
}

// Stopped reports whether Stop was called (the last config using the
// engine was unloaded).
func (e *Engine) Stopped() bool { return e.ctx.Err() != nil }
