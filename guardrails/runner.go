package guardrails

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Request is what the runner needs to know about the client's request.
type Request struct {
	// Body is the request's JSON body. The runner never modifies it; a
	// mutator's result is Result.Body.
	Body []byte
	// Type is RequestType(operation, stream): the call the client made.
	Type string
	// Format is RequestType(operation, false) of the call the target
	// was sent, when its bodies are not in Type's format (Input.Format);
	// empty means Type's.
	Format   string
	Provider string
	Model    string
	Metadata map[string]string
	Stream   bool
}

// Answer is what after-request hooks judge.
type Answer struct {
	// Body is the JSON answer; nil for a stream.
	Body []byte
	// Text is a streamed answer's assembled text (the content deltas of
	// the first choice, concatenated); ignored when Body is set.
	Text   string
	Status int
}

// Runner evaluates hooks. One Runner serves every request of a gateway
// handler; it keeps compiled hooks, keyed by their JSON, so a config seen
// before costs no parsing.
type Runner struct {
	// Env is passed to every check (egress client, resolver).
	Env Env
	// Saved resolves the string form of input/output guardrails.
	Saved SavedFunc

	seed  maphash.Seed
	once  sync.Once
	mu    sync.RWMutex
	cache map[uint64]*compiled
}

type compiled struct {
	raws  []json.RawMessage
	hooks []*Hook
}

// maxCompiled bounds the compiled-hook cache; when full it starts over.
const maxCompiled = 1024

// Result is one stage's outcome. A nil *Result (no hooks) is valid: every
// method reports "nothing happened".
type Result struct {
	// Hooks are the sync hooks' results in config order (skipped hooks
	// included), for hook_results.
	Hooks []HookResult
	// Body is the transformed request (before) or answer (after) body;
	// nil when nothing was transformed.
	Body []byte
	// Transformed reports that a mutator changed the body.
	Transformed bool

	deny, failed bool
	async        []*Hook
	in           Input
}

// Denied reports whether a failed hook with deny (or a passing one with
// on_success.deny) asks for a 446.
func (r *Result) Denied() bool { return r != nil && r.deny }

// Failed reports whether any sync hook that ran failed.
func (r *Result) Failed() bool { return r != nil && r.failed }

// HasAsync reports whether async hooks wait for RunAsync.
func (r *Result) HasAsync() bool { return r != nil && len(r.async) > 0 }

// Before runs the before-request hooks (before_request_hooks and
// input_guardrails, as routing merges them) on req. It returns nil, nil
// when hooks is empty, without allocating. The error is a 400
// (*apierror.Error) naming the hook and field of an unusable config: an
// unknown check, an unknown saved guardrail, a regex RE2 cannot compile.
//
// The caller then: answers StatusDenied with DenyBody if res.Denied(),
// without calling the provider; sends res.Body instead of the request
// body if res.Transformed; and after the answer is sent, `go
// res.RunAsync(ctx, logFn)` if res.HasAsync().
func (rn *Runner) Before(ctx context.Context, hooks []json.RawMessage, req *Request) (*Result, error) {
	if len(hooks) == 0 {
		return nil, nil
	}
	return rn.run(ctx, BeforeRequest, hooks, req, nil)
}

// After runs the after-request hooks (after_request_hooks and
// output_guardrails) on the answer. For a stream, pass the assembled text
// in ans.Text and a nil ans.Body. It returns nil, nil when hooks is empty.
//
// The caller then: withholds the answer and answers StatusDenied with
// DenyBody(before, after) if Denied(); otherwise sends res.Body (if
// Transformed) or the answer, with Status(before, after, upstream) and,
// for JSON answers, AttachResults; for streams, StreamEvent before
// "[DONE]". Async hooks run with RunAsync after the answer is sent.
func (rn *Runner) After(ctx context.Context, hooks []json.RawMessage, req *Request, ans *Answer) (*Result, error) {
	if len(hooks) == 0 {
		return nil, nil
	}
	return rn.run(ctx, AfterRequest, hooks, req, ans)
}

// Compile compiles a stage's hooks, or returns them from the cache.
func (rn *Runner) Compile(stage Stage, raws []json.RawMessage) ([]*Hook, error) {
	rn.once.Do(func() {
		rn.seed = maphash.MakeSeed()
		rn.cache = make(map[uint64]*compiled)
	})
	var mh maphash.Hash
	mh.SetSeed(rn.seed)
	_ = mh.WriteByte(byte(stage))
	for _, r := range raws {
		_, _ = mh.Write(r)
		_ = mh.WriteByte(0)
	}
	key := mh.Sum64()
	rn.mu.RLock()
	c := rn.cache[key]
	rn.mu.RUnlock()
	if c != nil && sameRaws(c.raws, raws) {
		return c.hooks, nil
	}
	hooks := make([]*Hook, len(raws))
	for i, raw := range raws {
		h, err := Compile(raw, generatedID(stage, raw), rn.Saved)
		if err != nil {
			return nil, err
		}
		hooks[i] = h
	}
	if err := LimitChecks(stage, hooks); err != nil {
		return nil, err
	}
	c = &compiled{raws: make([]json.RawMessage, len(raws)), hooks: hooks}
	for i, r := range raws {
		c.raws[i] = append(json.RawMessage(nil), r...)
	}
	rn.mu.Lock()
	if len(rn.cache) >= maxCompiled {
		clear(rn.cache)
	}
	rn.cache[key] = c
	rn.mu.Unlock()
	return hooks, nil
}

func sameRaws(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

func (rn *Runner) run(ctx context.Context, stage Stage, raws []json.RawMessage, req *Request, ans *Answer) (*Result, error) {
	hooks, err := rn.Compile(stage, raws)
	if err != nil {
		return nil, compileErr(err)
	}
	res := &Result{in: Input{
		Stage:       stage,
		RequestType: req.Type,
		Format:      req.Format,
		Provider:    req.Provider,
		Model:       req.Model,
		Metadata:    req.Metadata,
		Request:     req.Body,
		Stream:      req.Stream,
		Env:         &rn.Env,
	}}
	if ans != nil {
		res.in.Response, res.in.ResponseText, res.in.StatusCode = ans.Body, ans.Text, ans.Status
	}
	in := &res.in
	// Mutators first, in config order, so guardrails judge what will be
	// sent; results keep config order.
	res.Hooks = make([]HookResult, len(hooks))
	for _, h := range hooks {
		if h.Async {
			res.async = append(res.async, h)
		}
	}
	for pass := 0; pass < 2; pass++ {
		for i, h := range hooks {
			if (pass == 0) != (h.Type == TypeMutator) || h.Async {
				continue
			}
			hr := rn.runHook(ctx, h, in)
			res.Hooks[i] = hr
			if hr.Skipped {
				continue
			}
			if !hr.Verdict {
				res.failed = true
			}
			if hr.Deny {
				res.deny = true
			}
		}
	}
	// Drop the slots of async hooks, keeping order.
	if len(res.async) > 0 {
		kept := res.Hooks[:0]
		for i, h := range hooks {
			if !h.Async {
				kept = append(kept, res.Hooks[i])
			}
		}
		res.Hooks = kept
	}
	if stage == AfterRequest && in.ResponseTransformed {
		res.Body, res.Transformed = in.Response, true
	} else if stage == BeforeRequest && in.RequestTransformed {
		res.Body, res.Transformed = in.Request, true
	}
	return res, nil
}

// compileErr turns a compile error into the 400 a request gets.
func compileErr(err error) error {
	var ce *CompileError
	if errors.As(err, &ce) {
		return apierror.BadRequest("config", "%v", ce)
	}
	return apierror.BadRequest("config", "guardrails: %v", err)
}

// AsyncSize is how many request and answer bytes RunAsync holds until it
// returns: the size to give AsyncPool.Submit.
func (r *Result) AsyncSize() int64 {
	if r == nil {
		return 0
	}
	return int64(len(r.in.Request) + len(r.in.Response) + len(r.in.ResponseText))
}

// RunAsync runs the stage's async hooks on the same input and hands
// their results to done. Call it after the answer was sent, on an
// AsyncPool: `pool.Submit(res.AsyncSize(), func(ctx context.Context) {
// res.RunAsync(ctx, fn) })`; the request and answer bodies given to
// Before/After must not be reused until it returns. Async hooks never deny or change anything; async mutators are
// reported as skipped, as in the reference.
func (r *Result) RunAsync(ctx context.Context, done func([]HookResult)) {
	if r == nil || len(r.async) == 0 {
		return
	}
	in := r.in
	rn := &Runner{Env: *in.Env}
	in.Env = &rn.Env
	out := make([]HookResult, 0, len(r.async))
	for _, h := range r.async {
		if h.Type == TypeMutator {
			out = append(out, HookResult{ID: h.ID, Type: h.Type, Skipped: true})
			continue
		}
		hr := rn.runHook(ctx, h, &in)
		hr.Deny = false
		out = append(out, hr)
	}
	if done != nil {
		done(out)
	}
}

// skip applies the reference's rules for hooks that do not run.
func skip(h *Hook, in *Input) bool {
	switch in.BaseType() {
	case "chatComplete", "complete", "messages", "createModelResponse":
	case "embed":
		if in.Stage == AfterRequest || h.Type == TypeMutator {
			return true
		}
	default:
		return true
	}
	return in.Stage == AfterRequest && in.StatusCode != 200
}

func (rn *Runner) runHook(ctx context.Context, h *Hook, in *Input) HookResult {
	start := time.Now()
	hr := HookResult{ID: h.ID, Type: h.Type, Async: h.Async, CreatedAt: start}
	if skip(h, in) {
		hr.Skipped = true
		return hr
	}
	hr.Checks = make([]CheckResult, len(h.Checks))
	verdicts := make([]Verdict, len(h.Checks))
	if h.remote > 0 && len(h.Checks) > 1 && !h.Sequential && h.Type != TypeMutator {
		// Fill the text and payload caches first: the checks read them
		// concurrently, and share one copy of the request.
		_ = in.Text()
		_ = in.Payload()
		var g errgroup.Group
		g.SetLimit(MaxConcurrentChecks)
		for i, c := range h.Checks {
			g.Go(func() error {
				hr.Checks[i], verdicts[i] = runCheck(ctx, c, in)
				return nil
			})
		}
		_ = g.Wait()
		for i := range verdicts {
			applyTransform(in, &hr.Checks[i], verdicts[i])
		}
	} else {
		for i, c := range h.Checks {
			hr.Checks[i], verdicts[i] = runCheck(ctx, c, in)
			applyTransform(in, &hr.Checks[i], verdicts[i])
		}
	}
	hr.Verdict, hr.Transformed = true, false
	allOK := true
	for _, c := range hr.Checks {
		if !(c.Verdict || (c.Error != nil && !c.FailOnError)) {
			hr.Verdict = false
		}
		if !(c.Verdict || c.Error != nil) {
			allOK = false
		}
		hr.Transformed = hr.Transformed || c.Transformed
	}
	if hr.Verdict {
		hr.Deny = h.OnSuccess.Deny
	} else {
		hr.Deny = h.Deny || h.OnFail.Deny
	}
	if allOK {
		hr.Feedback = feedback(h.OnSuccess.Feedback, hr.Checks)
	} else {
		hr.Feedback = feedback(h.OnFail.Feedback, hr.Checks)
	}
	hr.ExecutionTime = time.Since(start).Milliseconds()
	return hr
}

func applyTransform(in *Input, cr *CheckResult, v Verdict) {
	if v.Transformed && v.Body != nil {
		in.setBody(v.Body)
		cr.Transformed = true
	}
}

func runCheck(ctx context.Context, c *CheckSpec, in *Input) (cr CheckResult, v Verdict) {
	start := time.Now()
	cr = CheckResult{ID: c.ID, CreatedAt: start, FailOnError: c.FailOnError}
	defer func() {
		if p := recover(); p != nil {
			v = Verdict{}
			cr.Verdict, cr.Data, cr.Transformed = false, nil, false
			cr.Error = &CheckError{Name: "Check error", Message: "Error executing check"}
		}
		cr.ExecutionTime = time.Since(start).Milliseconds()
	}()
	v, err := c.check.Check(ctx, in, c.Params)
	cr.Verdict, cr.Data, cr.Log = v.Pass, v.Data, v.Log
	if err != nil {
		name := "Error"
		if errors.Is(err, context.DeadlineExceeded) {
			name = "TimeoutError"
		}
		// A check's error may quote a URL with credentials (a webhook's
		// user:pass@ or ?token=): mask them wherever the result goes.
		cr.Error = &CheckError{Name: name, Message: MaskURLs(err.Error())}
	}
	return cr, v
}

func feedback(fb *Feedback, checks []CheckResult) *FeedbackResult {
	if fb == nil {
		return nil
	}
	out := &FeedbackResult{Value: fb.Value, Weight: fb.Weight, Metadata: make(map[string]any, len(fb.Metadata)+3)}
	for k, v := range fb.Metadata {
		out.Metadata[k] = v
	}
	var ok, failed, errored []byte
	add := func(b []byte, id string) []byte {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		return append(b, id...)
	}
	for _, c := range checks {
		switch {
		case c.Verdict:
			ok = add(ok, c.ID)
		case c.Error != nil:
			errored = add(errored, c.ID)
		default:
			failed = add(failed, c.ID)
		}
	}
	out.Metadata["successfulChecks"] = string(ok)
	out.Metadata["failedChecks"] = string(failed)
	out.Metadata["erroredChecks"] = string(errored)
	return out
}

// String helps logs and tests.
func (h *Hook) String() string { return fmt.Sprintf("%s %q (%d checks)", h.Type, h.ID, len(h.Checks)) }
