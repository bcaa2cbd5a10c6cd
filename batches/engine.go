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
	"sync/atomic"
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
	// DefaultMaxActive is how many batches may be queued or running on
	// one engine (process) at once; a create beyond it is a 429.
	DefaultMaxActive = 100
	// DefaultMaxRunning is how many batches dispatch lines at once; the
	// others wait in status validating, holding only their record.
	DefaultMaxRunning = 8
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
	// MaxLineBytes bounds one input line (default DefaultMaxLineBytes).
	MaxLineBytes int
	// Limits bounds the batches of the engine (see SetLimits).
	Limits Limits
	// Lease, when set and KV is a Leaser (Redis), runs each batch under a
	// lease of this length in the shared store: the owner renews it every
	// watchEvery, and when it lapses (the owner crashed, was killed or
	// replaced) another instance takes the batch over within Lease and a
	// half, resuming from its recorded lines. Cancels and counts then work
	// from any instance within a second. Without it (one instance, Caddy
	// storage) an instance resumes only its own batches, at Start.
	Lease time.Duration
	// Now replaces time.Now (tests drive expiry with it).
	Now func() time.Time
	// Logger receives operational events; never request contents.
	Logger *zap.Logger
}

// Limits bound how many batches an engine holds; zero fields take the
// defaults (DefaultMaxActive, DefaultMaxRunning).
type Limits struct {
	// MaxActive is how many batches may be queued or running at once.
	MaxActive int
	// MaxRunning is how many of them dispatch lines at once.
	MaxRunning int
}

func (l Limits) withDefaults() Limits {
	if l.MaxActive <= 0 {
		l.MaxActive = DefaultMaxActive
	}
	if l.MaxRunning <= 0 {
		l.MaxRunning = DefaultMaxRunning
	}
	return l
}

// Engine creates, runs, lists and cancels managed batches.
type Engine struct {
	cfg    Config
	global chan struct{}

	mu      sync.Mutex
	runners map[string][]*registration
	running map[string]*job // queued and running batches
	limits  Limits
	// runs counts batches holding a run slot; wake is closed (and
	// replaced) when one frees, to let a queued batch look again.
	runs        int
	wake        chan struct{}
	lastCreated int64

	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	// abandoned makes a stop keep the leases, as a crash does (tests).
	abandoned bool
	// chargeMu makes a line's charge claim one step in the store
	// without leases (charge.go).
	chargeMu sync.Mutex
	// lease is the lease length SetLease set (nanoseconds; 0: cfg.Lease).
	lease atomic.Int64
}

// job is a batch running on this engine. rec and the fields after it
// are guarded by Engine.mu.
type job struct {
	rec       *record
	memHeader http.Header
	// stop is closed when the batch must start no new line: it was
	// cancelled (cancelled) or must end early (abort says why).
	stop      chan struct{}
	stopped   bool
	cancelled bool
	abort     *LineError
	// lost is set when another instance took the batch's lease: this
	// one writes nothing more for it.
	lost bool
	// adopted is set on a batch taken over from another instance.
	adopted bool

	// wmu orders the record writes of the driver and of the lease
	// watcher, each snapshot taken under it, so an older snapshot never
	// overwrites a newer one; final is set once the terminal record is
	// stored, after which nothing else is written.
	wmu   sync.Mutex
	final bool
}

// halt closes j.stop once; the caller holds e.mu.
func (j *job) halt() {
	if !j.stopped {
		j.stopped = true
		close(j.stop)
	}
}

// abortWith ends j early for why, unless it is already ending.
func (e *Engine) abortWith(j *job, why LineError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if j.abort == nil && !j.cancelled {
		j.abort = &why
	}
	j.halt()
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
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Engine{
		cfg: cfg, global: make(chan struct{}, cfg.GlobalConcurrency), runners: map[string][]*registration{},
		running: map[string]*job{}, limits: cfg.Limits.withDefaults(), wake: make(chan struct{}), ctx: ctx, stop: stop,
	}
}

// SetLimits changes the engine's batch limits; the engine outlives
// configs, so each provisioned config sets its own, the newest winning.
// Batches already queued beyond a lowered MaxActive keep their place.
func (e *Engine) SetLimits(l Limits) {
	e.mu.Lock()
	e.limits = l.withDefaults()
	close(e.wake)
	e.wake = make(chan struct{})
	e.mu.Unlock()
}

// takeRun waits for a run slot (at most Limits.MaxRunning batches
// dispatch at once); false when the batch stopped or the engine ended
// first.
func (e *Engine) takeRun(j *job) bool {
	for {
		e.mu.Lock()
		if e.runs < e.limits.MaxRunning {
			e.runs++
			e.mu.Unlock()
			return true
		}
		wake := e.wake
		e.mu.Unlock()
		select {
		case <-wake:
		case <-j.stop:
			return false
		case <-e.ctx.Done():
			return false
		}
	}
}

func (e *Engine) freeRun() {
	e.mu.Lock()
	e.runs--
	close(e.wake)
	e.wake = make(chan struct{})
	e.mu.Unlock()
}

// nextCreated returns a creation time in nanoseconds greater than any
// this engine returned before, so batches created within one clock tick
// still list in creation order.
func (e *Engine) nextCreated() int64 {
	now := e.cfg.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if now <= e.lastCreated {
		now = e.lastCreated + 1
	}
	e.lastCreated = now
	return now
}

// Start resumes this instance's unfinished batches; later calls do
// nothing. See resume for what happens to each.
func (e *Engine) Start() {
	e.startOnce.Do(func() {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if l := e.leaser(); l != nil {
				e.adoptLoop(l)
				return
			}
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
	rec.Batch.seq = rec.Created
	return &rec, nil
}

func notFound(id string) *apierror.Error {
	return apierror.Newf(http.StatusNotFound, apierror.TypeInvalidRequest, "No batch found with id %s.", apierror.QuoteID(id)).WithCode("not_found")
}

// storeFailure is the answer of a management call while the batch store
// (Redis, or Caddy storage) cannot be read or written: a 503 naming it,
// which a client retries.
func storeFailure() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the gateway's batch store is unavailable; retry later").
		WithCode("store_unavailable")
}

// Create validates a POST /v1/batches body, checks the input file and
// queues the batch; it returns the batch in status validating. header is
// the creation request's headers (see SplitHeader for what is stored).
// The input file is a gateway file (files.IsGatewayID), read a chunk at
// a time while the batch runs, or, for providers with a files API, one
// fetched through the route's runner with GET /v1/files/{id}/content
// when the batch starts. Beyond Limits.MaxActive batches it is a 429.
func (e *Engine) Create(ctx context.Context, caller Caller, header http.Header, body []byte) (*Batch, error) {
	if err := jobs.CheckBatchCreate(body); err != nil {
		return nil, err
	}
	obj := gjson.ParseBytes(body)
	if err := e.checkInput(ctx, caller, obj.Get("input_file_id").Str); err != nil {
		return nil, err
	}
	persist, memory := SplitHeader(header)
	created := e.nextCreated()
	now := created / int64(time.Second)
	b := Batch{
		ID: IDPrefix + randHex(16), Object: "batch", Endpoint: obj.Get("endpoint").Str,
		InputFileID: obj.Get("input_file_id").Str, CompletionWindow: obj.Get("completion_window").Str,
		Status: StatusValidating, CreatedAt: now, ExpiresAt: ptr(now + int64(Window/time.Second)), seq: created,
	}
	if md := obj.Get("metadata"); md.IsObject() {
		b.Metadata = map[string]string{}
		md.ForEach(func(k, v gjson.Result) bool { b.Metadata[k.Str] = v.Str; return true })
	}
	rec := &record{Batch: b, Caller: caller, Instance: e.cfg.Instance, Header: persist, Resumable: len(memory) == 0, Created: created}
	if p := e.nativeProvider(caller, header, b.Endpoint, b.CompletionWindow); p != "" {
		rec.Native = &nativeState{Provider: p}
	}
	j := &job{rec: rec, memHeader: memory, stop: make(chan struct{})}
	// The place is taken before the record is stored, so concurrent
	// creates cannot pass the limit together.
	e.mu.Lock()
	if limit := e.limits.MaxActive; len(e.running) >= limit {
		e.mu.Unlock()
		return nil, tooManyBatches(limit)
	}
	e.running[b.ID] = j
	e.mu.Unlock()
	// The lease is taken before the record exists, so no other instance
	// can adopt the new batch.
	if l := e.leaser(); l != nil && (!e.claim(l, caller.WorkspaceID, b.ID) || e.markActive(ctx, caller.WorkspaceID, b.ID) != nil) {
		e.mu.Lock()
		delete(e.running, b.ID)
		e.mu.Unlock()
		return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the gateway's batch store is unavailable").WithCode("store_unavailable")
	}
	if err := e.save(ctx, rec); err != nil {
		e.mu.Lock()
		delete(e.running, b.ID)
		e.mu.Unlock()
		return nil, storeFailure()
	}
	snap := rec.Batch.clone()
	e.launch(j)
	return snap, nil
}

// checkInput answers, at creation, what can be known about the input
// file without reading it: a gateway file must exist in the caller's
// workspace with purpose batch; a provider file id must be well formed
// and the creating route configured.
func (e *Engine) checkInput(ctx context.Context, caller Caller, id string) error {
	notFound := apierror.BadRequest("input_file_id", "input_file_id %s was not found", apierror.QuoteID(id)).WithCode("not_found")
	if files.IsGatewayID(id) {
		f, err := e.cfg.Files.Get(ctx, caller.WorkspaceID, id)
		if err != nil {
			if ae := new(apierror.Error); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				return notFound
			}
			// A store fault is the file store's 503, not a 500.
			return files.AsAPIError(err)
		}
		if f.Purpose != files.PurposeBatch {
			return apierror.BadRequest("input_file_id", "input_file_id %s must be a file uploaded with purpose 'batch'", apierror.QuoteID(id))
		}
		return nil
	}
	if e.runnerFor(caller.Route) == nil || !apierror.IDShaped(id) {
		return notFound
	}
	return nil
}

// launch registers j as running and starts its driver.
// (Create has registered it already, under the limit.)
func (e *Engine) launch(j *job) { e.launchWith(j, func() { e.drive(j) }) }

// launchWith registers j as running and runs run for it, under its lease
// when the engine has leases: watched while it runs, released after
// (unless another instance took it, or the engine was abandoned as a
// crash leaves it), so a batch stopped with its engine is adopted by
// another instance at once.
func (e *Engine) launchWith(j *job, run func()) {
	id, ws := j.rec.Batch.ID, j.rec.Caller.WorkspaceID
	e.mu.Lock()
	e.running[id] = j
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		l := e.leaser()
		var done chan struct{}
		if l != nil {
			done = make(chan struct{})
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.watch(j, l, done)
			}()
		}
		run()
		if done != nil {
			close(done)
		}
		e.mu.Lock()
		delete(e.running, id)
		keep := j.lost || e.abandoned
		e.mu.Unlock()
		if l != nil && !keep {
			ctx, cancel := ioCtx()
			_ = l.Release(ctx, e.leaseKey(ws, id), e.cfg.Instance)
			cancel()
		}
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
// the mark up within watchEvery (with leases) or at its next checkpoint. Terminal batches give a 400.
func (e *Engine) Cancel(ctx context.Context, workspace, id string) (*Batch, error) {
	if !IsManagedID(id) {
		return nil, notFound(id)
	}
	e.mu.Lock()
	if j, ok := e.running[id]; ok && j.rec.Caller.WorkspaceID == workspace {
		b := &j.rec.Batch
		if !Terminal(b.Status) && b.Status != StatusCancelling && b.Status != StatusFinalizing {
			b.Status, b.CancellingAt = StatusCancelling, ptr(e.cfg.Now().Unix())
			if !j.cancelled && j.abort == nil {
				j.cancelled = true
				j.halt()
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
		if e.leaser() != nil {
			// The owner's record writes could overwrite the status; the
			// mark it watches for cannot be.
			if err := e.cfg.KV.Store(ctx, e.cancelKey(workspace, id), []byte("1")); err != nil {
				return nil, storeFailure()
			}
		}
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

// SortNewestFirst orders managed batches by created_at descending, the
// order of every batch list; within one second they keep their creation
// order (record.Created). A provider's list is not sorted with them but
// merged in its own order (the handler's mergeNewestFirst): its
// second-resolution created_at cannot recover that order.
func SortNewestFirst(bs []*Batch) {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if a.CreatedAt != b.CreatedAt {
			return a.CreatedAt > b.CreatedAt
		}
		if a.seq != b.seq {
			return a.seq > b.seq
		}
		return a.ID > b.ID
	})
}

// Stopped reports whether Stop was called (the last config using the
// engine was unloaded).
func (e *Engine) Stopped() bool { return e.ctx.Err() != nil }
