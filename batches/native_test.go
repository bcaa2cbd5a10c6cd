package batches

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// fakeNative is a route whose provider has a job API, kept in memory: a
// line with "reject":true does not translate, one with "fail":true errs
// at the provider; jobs end at once unless hold is set (then only a
// cancel ends them, every line canceled).
type fakeNative struct {
	*fakeRunner
	mu        sync.Mutex
	hold      bool
	block     bool // Submit waits for its context to end
	lines     map[string][]byte
	submits   int
	cancels   int
	recorded  map[string]string // custom_id -> model, of Record calls
	cancelled bool
}

func newFakeNative() *fakeNative {
	return &fakeNative{fakeRunner: &fakeRunner{}, lines: map[string][]byte{}, recorded: map[string]string{}}
}

func (f *fakeNative) NativeProvider(Caller, http.Header, string) string { return "fakeprov" }

func (f *fakeNative) NativeJobs(_ context.Context, _ Caller, _ http.Header, provider, _ string) (NativeJobs, error) {
	if provider != "fakeprov" {
		return nil, errors.New("other provider")
	}
	return f, nil
}

func (f *fakeNative) Submit(ctx context.Context, lines providers.BatchLines, reject func(string, error)) (string, error) {
	f.mu.Lock()
	f.submits++
	block := f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	err := lines(func(id string, body []byte) error {
		if gjson.GetBytes(body, "reject").Bool() {
			reject(id, apierror.BadRequest("model", "refused"))
			return nil
		}
		f.mu.Lock()
		f.lines[id] = body
		f.mu.Unlock()
		return nil
	})
	return "job-1", err
}

func (f *fakeNative) Get(context.Context, string) (providers.BatchJob, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hold && !f.cancelled {
		return providers.BatchJob{ID: "job-1", Processing: len(f.lines)}, nil
	}
	return providers.BatchJob{ID: "job-1", Ended: true}, nil
}

func (f *fakeNative) Cancel(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels++
	f.cancelled = true
	return nil
}

func (f *fakeNative) Results(_ context.Context, _ string, fn func(*NativeResult) error) error {
	f.mu.Lock()
	lines := make(map[string][]byte, len(f.lines))
	for k, v := range f.lines {
		lines[k] = v
	}
	cancelled := f.cancelled
	f.mu.Unlock()
	for id, body := range lines {
		r := &NativeResult{BatchResult: providers.BatchResult{ID: id, Kind: providers.BatchSucceeded, Status: 200, Body: []byte(`{"object":"chat.completion"}`)}}
		switch {
		case cancelled:
			r.BatchResult = providers.BatchResult{ID: id, Kind: providers.BatchCanceled}
		case gjson.GetBytes(body, "fail").Bool():
			r.Kind, r.Status, r.Body = providers.BatchErrored, 404, []byte(`{"error":{"message":"nope"}}`)
		}
		if r.Kind != providers.BatchCanceled {
			r.Record = func(_ context.Context, c *Charge, model string) {
				f.mu.Lock()
				f.recorded[c.CustomID] = model
				f.mu.Unlock()
			}
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func newNativeEnv(t *testing.T) (*env, *fakeNative) {
	e := newEnv(t, Config{})
	f := newFakeNative()
	e.engine.RegisterRunner(testRoute, f)
	return e, f
}

func createNative(t *testing.T, e *env, content []byte) *Batch {
	t.Helper()
	b, err := e.engine.Create(context.Background(), e.caller, http.Header{},
		[]byte(`{"input_file_id":"`+e.upload(t, content)+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNativeOneJob(t *testing.T) {
	e, f := newNativeEnv(t)
	defer e.engine.Stop()
	in := append(chatLines(3, 2), []byte(`{"custom_id":"req-4","method":"POST","url":"/v1/chat/completions","body":{"model":"m","reject":true}}`+"\n")...)
	b := e.wait(t, e.engine, createNative(t, e, in).ID, StatusCompleted)
	if b.RequestCounts != (RequestCounts{Total: 4, Completed: 2, Failed: 2}) {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	if f.submits != 1 || len(f.lines) != 3 || f.fakeRunner.count() != 0 {
		t.Fatalf("%d submits of %d lines, %d lines run one by one", f.submits, len(f.lines), f.fakeRunner.count())
	}
	out, errs := e.fileLines(t, b.OutputFileID), e.fileLines(t, b.ErrorFileID)
	if len(out) != 2 || len(errs) != 2 {
		t.Fatalf("out %v errs %v", out, errs)
	}
	for _, l := range errs {
		switch l.Get("custom_id").Str {
		case "req-2":
			if l.Get("response.status_code").Int() != 404 {
				t.Fatalf("provider error %s", l.Raw)
			}
		case "req-4":
			if l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.param").Str != "model" {
				t.Fatalf("rejected line %s", l.Raw)
			}
		default:
			t.Fatalf("error line %s", l.Raw)
		}
	}
	// One ledger record per line the provider answered, with its model.
	if len(f.recorded) != 3 || f.recorded["req-2"] != "m" {
		t.Fatalf("recorded %v", f.recorded)
	}
}

func TestNativeExpiryCancelsJob(t *testing.T) {
	e, f := newNativeEnv(t)
	defer e.engine.Stop()
	f.hold = true
	b := createNative(t, e, chatLines(2))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		f.mu.Lock()
		n := len(f.lines)
		f.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never submitted")
		}
	}
	e.clock.Add(Window + time.Second)
	b = e.wait(t, e.engine, b.ID, StatusExpired)
	errs := e.fileLines(t, b.ErrorFileID)
	if f.cancels != 1 || len(errs) != 2 || errs[0].Get("error.code").Str != "batch_expired" {
		t.Fatalf("%d provider cancels, errors %v", f.cancels, errs)
	}
}

// TestNativeSubmitInterrupted: an engine stopped while it submitted
// leaves a batch whose job may exist; the next start fails it rather
// than submit again.
func TestNativeSubmitInterrupted(t *testing.T) {
	e, f := newNativeEnv(t)
	f.block = true
	b := createNative(t, e, chatLines(2))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		f.mu.Lock()
		n := f.submits
		f.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never submitted")
		}
	}
	e.engine.Stop()
	f.block = false
	eng := NewEngine(Config{KV: e.kv, Files: e.files, Now: e.clock.Now, Instance: "instance-1"})
	eng.RegisterRunner(testRoute, f)
	eng.Start()
	defer eng.Stop()
	got := e.wait(t, eng, b.ID, StatusFailed)
	if got.Errors == nil || got.Errors.Data[0].Code != "native_submit_interrupted" || f.submits != 1 {
		t.Fatalf("errors %+v after %d submits", got.Errors, f.submits)
	}
}

func TestNativeIDs(t *testing.T) {
	for _, n := range []int{0, 7, 49999} {
		if got := nativeIndex(nativeID(n)); got != n {
			t.Fatalf("%d -> %s -> %d", n, nativeID(n), got)
		}
	}
	for _, id := range []string{"", "gw-", "gw-x", "xx-1", "gw-123456789012"} {
		if nativeIndex(id) != -1 {
			t.Fatalf("%q read as an index", id)
		}
	}
}
