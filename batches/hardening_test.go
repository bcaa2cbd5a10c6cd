package batches

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// routeRunner is a runner that names itself in every answer.
type routeRunner struct {
	name  string
	calls atomic.Int32
	hook  func()
}

func (r *routeRunner) Run(context.Context, Caller, string, string, http.Header, []byte) (int, []byte, error) {
	r.calls.Add(1)
	if r.hook != nil {
		r.hook()
	}
	return 200, []byte(`{"object":"chat.completion","route":"` + r.name + `"}`), nil
}

// TestRunnerPerRoute: lines run through the runner of the batch's route
// only; of two registrations under one key the newest runs, and its
// withdrawal brings the older back; with none left the batch fails with
// route_unavailable, its counts the lines in its files.
func TestRunnerPerRoute(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1, CheckpointEvery: 1})
	defer e.engine.Stop()
	a, b1, b2 := &routeRunner{name: "a"}, &routeRunner{name: "b1"}, &routeRunner{name: "b2"}
	e.engine.RegisterRunner("a", a)
	withdrawB1 := e.engine.RegisterRunner("b", b1)
	withdrawB2 := e.engine.RegisterRunner("b", b2)
	e.caller.Route = "b"
	file := e.upload(t, chatLines(4))
	got := e.wait(t, e.engine, e.create(t, e.engine, file, nil).ID, StatusCompleted)
	if a.calls.Load() != 0 || b1.calls.Load() != 0 || b2.calls.Load() != 4 {
		t.Fatalf("calls a=%d b1=%d b2=%d", a.calls.Load(), b1.calls.Load(), b2.calls.Load())
	}
	if l := e.fileLines(t, got.OutputFileID); l[0].Get("response.body.route").Str != "b2" {
		t.Fatalf("line %s", l[0].Raw)
	}
	withdrawB2()
	got = e.wait(t, e.engine, e.create(t, e.engine, file, nil).ID, StatusCompleted)
	if l := e.fileLines(t, got.OutputFileID); b1.calls.Load() != 4 || l[0].Get("response.body.route").Str != "b1" {
		t.Fatalf("after the newest withdrew: b1 ran %d lines", b1.calls.Load())
	}
	// The route goes away while the batch runs.
	var once sync.Once
	release := make(chan struct{})
	b1.hook = func() { once.Do(func() { withdrawB1(); close(release) }) }
	got = e.wait(t, e.engine, e.create(t, e.engine, file, nil).ID, StatusFailed)
	<-release
	if got.Errors == nil || got.Errors.Data[0].Code != "route_unavailable" || a.calls.Load() != 0 {
		t.Fatalf("route gone: %+v, a ran %d", got.Errors, a.calls.Load())
	}
	out, errs := e.fileLines(t, got.OutputFileID), e.fileLines(t, got.ErrorFileID)
	if got.RequestCounts != (RequestCounts{4, len(out), len(errs)}) || len(out) != 1 || errs[0].Get("error.code").Str != "route_unavailable" {
		t.Fatalf("counts %+v, %d output and %d error lines", got.RequestCounts, len(out), len(errs))
	}
	// A create on a route with no runner, for a provider's file.
	if _, err := e.engine.Create(context.Background(), e.caller, nil,
		[]byte(`{"input_file_id":"file-abc","endpoint":"/v1/chat/completions","completion_window":"24h"}`)); err == nil {
		t.Fatal("created a batch over a provider file on a route without a runner")
	}
}

// revokingRunner answers like fakeRunner until revoked is set.
type revokingRunner struct {
	fakeRunner
	revoked atomic.Bool
}

func (r *revokingRunner) Run(ctx context.Context, id Caller, method, path string, h http.Header, body []byte) (int, []byte, error) {
	if r.revoked.Load() {
		return 0, nil, ErrCallerRevoked
	}
	return r.fakeRunner.Run(ctx, id, method, path, h, body)
}

// TestRevokedCallerStopsBatch: once the runner reports the creator's key
// revoked, no further line runs and the batch fails with api_key_revoked.
func TestRevokedCallerStopsBatch(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1})
	defer e.engine.Stop()
	r := &revokingRunner{}
	r.hook = func(context.Context, []byte) error {
		if r.count() == 2 {
			r.revoked.Store(true)
		}
		return nil
	}
	e.engine.RegisterRunner(testRoute, r)
	b := e.wait(t, e.engine, e.create(t, e.engine, e.upload(t, chatLines(10)), nil).ID, StatusFailed)
	if r.count() != 2 || b.Errors == nil || b.Errors.Data[0].Code != "api_key_revoked" {
		t.Fatalf("ran %d lines, errors %+v", r.count(), b.Errors)
	}
	out, errs := e.fileLines(t, b.OutputFileID), e.fileLines(t, b.ErrorFileID)
	if b.RequestCounts != (RequestCounts{10, 2, 8}) || len(out) != 2 || len(errs) != 8 || errs[0].Get("error.code").Str != "api_key_revoked" {
		t.Fatalf("counts %+v, %d/%d lines", b.RequestCounts, len(out), len(errs))
	}
}

// TestOutputOverStoreLimit: results beyond the store's size limit fail
// the batch with output_too_large; the lines that fit are in the output
// file, the others in the error file, and the counts are those lines.
func TestOutputOverStoreLimit(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1, CheckpointEvery: 3})
	defer e.engine.Stop()
	big := strings.Repeat("y", 2000)
	e.engine.RegisterRunner(testRoute, &answerRunner{body: []byte(`{"object":"chat.completion","text":"` + big + `"}`)})
	file := e.upload(t, chatLines(40))
	e.files.SetMaxBytes(20_000)
	b := e.wait(t, e.engine, e.create(t, e.engine, file, nil).ID, StatusFailed)
	out, errs := e.fileLines(t, b.OutputFileID), e.fileLines(t, b.ErrorFileID)
	if b.Errors == nil || b.Errors.Data[0].Code != "output_too_large" || len(out) == 0 || len(out)+len(errs) != 40 ||
		b.RequestCounts != (RequestCounts{40, len(out), len(errs)}) {
		t.Fatalf("batch %+v errors %+v, %d/%d lines", b.RequestCounts, b.Errors, len(out), len(errs))
	}
	f, _ := e.files.Get(context.Background(), e.caller.WorkspaceID, *b.OutputFileID)
	if f.Bytes > 20_000 || errs[len(errs)-1].Get("error.code").Str != "output_too_large" {
		t.Fatalf("output file %d bytes; last error line %s", f.Bytes, errs[len(errs)-1].Raw)
	}
}

type answerRunner struct{ body []byte }

func (a *answerRunner) Run(context.Context, Caller, string, string, http.Header, []byte) (int, []byte, error) {
	return 200, a.body, nil
}

// flakyKV fails every write while down is set.
type flakyKV struct {
	files.KV
	down  atomic.Bool
	fails atomic.Int32
}

func (f *flakyKV) Store(ctx context.Context, key string, value []byte) error {
	if f.down.Load() {
		f.fails.Add(1)
		return errors.New("connection refused")
	}
	return f.KV.Store(ctx, key, value)
}

// TestStoreOutagePausesBatch: writes failing mid-batch are retried until
// the store is back; no result is lost and the counts are the lines.
func TestStoreOutagePausesBatch(t *testing.T) {
	base := newEnv(t, Config{})
	base.engine.Stop()
	kv := &flakyKV{KV: base.kv}
	e := newEnvKV(t, Config{Concurrency: 2, CheckpointEvery: 5}, kv)
	defer e.engine.Stop()
	file := e.upload(t, chatLines(60, 7))
	e.runner.hook = func(context.Context, []byte) error {
		if e.runner.count() == 20 {
			kv.down.Store(true)
		}
		return nil
	}
	b := e.create(t, e.engine, file, nil)
	for kv.fails.Load() < 5 {
		runtimeGosched()
	}
	kv.down.Store(false)
	b = e.wait(t, e.engine, b.ID, StatusCompleted)
	out, errs := e.fileLines(t, b.OutputFileID), e.fileLines(t, b.ErrorFileID)
	if b.RequestCounts != (RequestCounts{60, 59, 1}) || len(out) != 59 || len(errs) != 1 {
		t.Fatalf("counts %+v, %d/%d lines", b.RequestCounts, len(out), len(errs))
	}
}

// TestListOrderWithinSecond: batches created in one second (the clock
// stands still) list newest first.
func TestListOrderWithinSecond(t *testing.T) {
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	file := e.upload(t, chatLines(1))
	var ids []string
	for range 6 {
		ids = append(ids, e.create(t, e.engine, file, nil).ID)
	}
	all := []*Batch{{ID: "batch_zzz_provider", CreatedAt: e.clock.Now().Unix()}}
	mine, err := e.engine.All(context.Background(), e.caller.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, mine...)
	SortNewestFirst(all)
	for i, id := range ids {
		if got := all[len(ids)-1-i].ID; got != id {
			t.Fatalf("position %d: %s, want %s", len(ids)-1-i, got, id)
		}
	}
	page, _ := e.engine.List(context.Background(), e.caller.WorkspaceID, ListParams{Limit: 2})
	if page.Data[0].ID != ids[5] || page.Data[1].ID != ids[4] {
		t.Fatalf("first page %s, %s", page.Data[0].ID, page.Data[1].ID)
	}
}

// TestActiveLimit: beyond Limits.MaxActive queued or running batches a
// create is a 429 in OpenAI's envelope; a place frees when one ends.
func TestActiveLimit(t *testing.T) {
	e := newEnv(t, Config{Limits: Limits{MaxActive: 3, MaxRunning: 1}})
	defer e.engine.Stop()
	release := make(chan struct{})
	e.runner.hook = func(ctx context.Context, _ []byte) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	file := e.upload(t, chatLines(1))
	var ids []string
	for range 3 {
		ids = append(ids, e.create(t, e.engine, file, nil).ID)
	}
	_, err := e.engine.Create(context.Background(), e.caller, nil,
		[]byte(`{"input_file_id":"`+file+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`))
	ae := apierror.As(err)
	if ae == nil || ae.Status != 429 || !strings.Contains(string(ae.Body()), "too_many_batches") {
		t.Fatalf("fourth create: %v", err)
	}
	// One runs, two wait in validating.
	if b, _ := e.engine.Get(context.Background(), e.caller.WorkspaceID, ids[2]); b.Status != StatusValidating {
		t.Fatalf("queued batch in %s", b.Status)
	}
	close(release)
	for _, id := range ids {
		e.wait(t, e.engine, id, StatusCompleted)
	}
	e.create(t, e.engine, file, nil)
}

// TestCustomHostCredentialsNotPersisted: a custom host with userinfo or
// a query is held in memory only.
func TestCustomHostCredentialsNotPersisted(t *testing.T) {
	for _, tc := range []struct {
		host    string
		persist bool
	}{
		{"https://llm.example.com/v1", true},
		{"https://user:pass@llm.example.com/v1", false},
		{"https://llm.example.com/v1?key=secret", false},
		{"https://llm.example.com/v1#frag", false},
	} {
		persist, memory := SplitHeader(http.Header{"X-Gateway-Custom-Host": {tc.host}})
		if (persist.Get("X-Gateway-Custom-Host") != "") != tc.persist || (memory.Get("X-Gateway-Custom-Host") != "") == tc.persist {
			t.Errorf("%s: persisted %v, memory %v", tc.host, persist, memory)
		}
	}
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	b := e.create(t, e.engine, e.upload(t, chatLines(1)), http.Header{"X-Gateway-Custom-Host": {"https://u:hunter2@h.example/v1"}})
	e.wait(t, e.engine, b.ID, StatusCompleted)
	raw, _ := e.kv.Load(context.Background(), e.engine.key(e.caller.WorkspaceID, b.ID))
	if strings.Contains(string(raw), "hunter2") || gjson.GetBytes(raw, "resumable").Bool() {
		t.Fatalf("stored record %s", raw)
	}
	if e.runner.header.Get("X-Gateway-Custom-Host") != "https://u:hunter2@h.example/v1" {
		t.Fatal("the line ran without its custom host")
	}
}

func runtimeGosched() { time.Sleep(time.Millisecond) }
