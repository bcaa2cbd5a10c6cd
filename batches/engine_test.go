package batches

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// fakeRunner answers chat requests; a body with "fail":true gets a 500,
// and hook (when set) runs before each answer.
type fakeRunner struct {
	mu     sync.Mutex
	calls  []string // custom bodies seen, in order
	hook   func(ctx context.Context, body []byte) error
	header http.Header
}

func (f *fakeRunner) Run(ctx context.Context, id Caller, method, path string, h http.Header, body []byte) (int, []byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, gjson.GetBytes(body, "n").Raw)
	f.header = h
	hook := f.hook
	f.mu.Unlock()
	if method != http.MethodPost || path != "/v1/chat/completions" || id.WorkspaceID == "" {
		return 0, nil, fmt.Errorf("unexpected call %s %s %+v", method, path, id)
	}
	if hook != nil {
		if err := hook(ctx, body); err != nil {
			return 0, nil, err
		}
	}
	if gjson.GetBytes(body, "fail").Bool() {
		return 500, []byte(`{"error":{"message":"boom","type":"server_error"}}`), nil
	}
	return 200, []byte(`{"id":"chatcmpl-1","object":"chat.completion","n":` + gjson.GetBytes(body, "n").Raw + `}`), nil
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	kv     files.KV
	files  *files.Store
	engine *Engine
	runner *fakeRunner
	clock  *clock
	caller Caller
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	return newEnvKV(t, cfg, &certmagic.FileStorage{Path: t.TempDir()})
}

func newEnvKV(t testing.TB, cfg Config, kv files.KV) *env {
	e := &env{kv: kv, runner: &fakeRunner{},
		clock: &clock{now: time.Unix(1_800_000_000, 0)}, caller: Caller{Name: "k", WorkspaceID: "ws-1", OrganisationID: "org", Route: testRoute}}
	e.files = files.NewStore(e.kv, files.Config{Now: e.clock.Now, Prefix: cfg.Prefix + "/files"})
	e.engine = e.newEngine(cfg)
	return e
}

func (e *env) newEngine(cfg Config) *Engine {
	cfg.KV, cfg.Files, cfg.Now = e.kv, e.files, e.clock.Now
	if cfg.Instance == "" {
		cfg.Instance = "instance-1"
	}
	eng := NewEngine(cfg)
	eng.RegisterRunner(testRoute, e.runner)
	eng.Start()
	return eng
}

func chatLines(n int, failing ...int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fail := false
		for _, f := range failing {
			fail = fail || f == i
		}
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","n":%d,"fail":%v}}`+"\n", i, i, fail)
	}
	return b.Bytes()
}

func (e *env) upload(t testing.TB, content []byte) string {
	t.Helper()
	f, err := e.files.Create(context.Background(), e.caller.WorkspaceID, "in.jsonl", files.PurposeBatch, content)
	if err != nil {
		t.Fatal(err)
	}
	return f.ID
}

func (e *env) create(t *testing.T, eng *Engine, fileID string, h http.Header) *Batch {
	t.Helper()
	b, err := eng.Create(context.Background(), e.caller, h,
		[]byte(`{"input_file_id":"`+fileID+`","endpoint":"/v1/chat/completions","completion_window":"immediate","metadata":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != StatusValidating || !IsManagedID(b.ID) || b.Object != "batch" || b.Metadata["k"] != "v" {
		t.Fatalf("created %+v", b)
	}
	return b
}

// wait polls until the batch reaches status (a safety bound, not a
// timing assertion: the test fails only if it never gets there).
func (e *env) wait(t *testing.T, eng *Engine, id string, status ...string) *Batch {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := eng.Get(context.Background(), e.caller.WorkspaceID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range status {
			if b.Status == s {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch stuck in %s, want %v", b.Status, status)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fileLines returns the JSON lines of a result file.
func (e *env) fileLines(t *testing.T, id *string) []gjson.Result {
	t.Helper()
	if id == nil {
		return nil
	}
	b, f, err := e.files.Content(context.Background(), e.caller.WorkspaceID, *id)
	if err != nil {
		t.Fatal(err)
	}
	if f.Purpose != files.PurposeBatchOutput {
		t.Fatalf("purpose %s", f.Purpose)
	}
	var out []gjson.Result
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !gjson.Valid(l) {
			t.Fatalf("invalid line %q", l)
		}
		out = append(out, gjson.Parse(l))
	}
	return out
}

func TestThreeLinesOneFailing(t *testing.T) {
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	b := e.create(t, e.engine, e.upload(t, chatLines(3, 2)), http.Header{"X-Gateway-Provider": {"anthropic"}})
	b = e.wait(t, e.engine, b.ID, StatusCompleted)
	if b.RequestCounts != (RequestCounts{Total: 3, Completed: 2, Failed: 1}) {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	if e.runner.count() != 3 {
		t.Fatalf("runner calls %d", e.runner.count())
	}
	if b.InProgressAt == nil || b.FinalizingAt == nil || b.CompletedAt == nil || b.ExpiresAt == nil || *b.ExpiresAt != b.CreatedAt+86400 {
		t.Fatalf("timestamps %+v", b)
	}
	if got := e.runner.header.Get("X-Gateway-Provider"); got != "anthropic" {
		t.Fatalf("line header provider %q", got)
	}
	out, errs := e.fileLines(t, b.OutputFileID), e.fileLines(t, b.ErrorFileID)
	if len(out) != 2 || len(errs) != 1 {
		t.Fatalf("output %d lines, errors %d", len(out), len(errs))
	}
	seen := map[string]bool{}
	for _, l := range out {
		if !strings.HasPrefix(l.Get("id").Str, "batch_req_") || l.Get("response.status_code").Int() != 200 ||
			l.Get("response.body.object").Str != "chat.completion" || l.Get("error").Type != gjson.Null || !strings.HasPrefix(l.Get("response.request_id").Str, "req_") {
			t.Fatalf("output line %s", l.Raw)
		}
		seen[l.Get("custom_id").Str] = true
	}
	if !seen["req-1"] || !seen["req-3"] {
		t.Fatalf("output custom_ids %v", seen)
	}
	if errs[0].Get("custom_id").Str != "req-2" || errs[0].Get("response.status_code").Int() != 500 || errs[0].Get("response.body.error.message").Str != "boom" {
		t.Fatalf("error line %s", errs[0].Raw)
	}
	// The stored record matches the live one once the driver is done.
	other := e.newEngine(Config{Instance: "other"})
	defer other.Stop()
	stored, err := other.Get(context.Background(), e.caller.WorkspaceID, b.ID)
	if err != nil || stored.Status != StatusCompleted || stored.RequestCounts != b.RequestCounts {
		t.Fatalf("stored %+v %v", stored, err)
	}
}

func TestRunnerErrors(t *testing.T) {
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	e.runner.hook = func(_ context.Context, body []byte) error {
		switch gjson.GetBytes(body, "n").Int() {
		case 1:
			return apierror.New(429, apierror.TypeRateLimit, "slow down")
		case 2:
			return fmt.Errorf("secret-bearing internal error sk-123")
		}
		return nil
	}
	b := e.create(t, e.engine, e.upload(t, chatLines(3)), nil)
	b = e.wait(t, e.engine, b.ID, StatusCompleted)
	errs := e.fileLines(t, b.ErrorFileID)
	if b.RequestCounts != (RequestCounts{3, 1, 2}) || len(errs) != 2 {
		t.Fatalf("counts %+v, %d error lines", b.RequestCounts, len(errs))
	}
	for _, l := range errs {
		switch l.Get("custom_id").Str {
		case "req-1":
			if l.Get("response.status_code").Int() != 429 || l.Get("response.body.error.message").Str != "slow down" {
				t.Fatalf("apierror line %s", l.Raw)
			}
		case "req-2":
			if l.Get("response").Type != gjson.Null || l.Get("error.code").Str != "server_error" || strings.Contains(l.Raw, "sk-123") {
				t.Fatalf("error line %s", l.Raw)
			}
		}
	}
}

func TestCancelDuringRun(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1})
	defer e.engine.Stop()
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.runner.hook = func(ctx context.Context, _ []byte) error {
		once.Do(func() { close(started); <-release })
		return nil
	}
	b := e.create(t, e.engine, e.upload(t, chatLines(5)), nil)
	<-started
	c, err := e.engine.Cancel(context.Background(), e.caller.WorkspaceID, b.ID)
	if err != nil || c.Status != StatusCancelling || c.CancellingAt == nil {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if got, _ := e.engine.Get(context.Background(), e.caller.WorkspaceID, b.ID); got.Status != StatusCancelling {
		t.Fatalf("status while running line finishes: %s", got.Status)
	}
	close(release) // the running line finishes; no new one starts
	b = e.wait(t, e.engine, b.ID, StatusCancelled)
	if e.runner.count() != 1 {
		t.Fatalf("runner calls after cancel: %d", e.runner.count())
	}
	if b.RequestCounts != (RequestCounts{5, 1, 4}) || b.CancelledAt == nil {
		t.Fatalf("cancelled %+v", b)
	}
	out, errs := e.fileLines(t, b.OutputFileID), e.fileLines(t, b.ErrorFileID)
	if len(out) != 1 || out[0].Get("custom_id").Str != "req-1" || len(errs) != 4 || errs[0].Get("error.code").Str != "batch_cancelled" {
		t.Fatalf("files: %d %d", len(out), len(errs))
	}
	if _, err := e.engine.Cancel(context.Background(), e.caller.WorkspaceID, b.ID); err == nil || apierror.As(err).Status != 400 {
		t.Fatalf("cancel of a cancelled batch: %v", err)
	}
}

func TestValidationFailures(t *testing.T) {
	ok := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`
	tests := []struct {
		name, input string
		line        int
		code        string
	}{
		{"invalid json", ok + "\n{not json\n", 2, "invalid_json_line"},
		{"missing custom_id", `{"method":"POST","url":"/v1/chat/completions","body":{}}`, 1, "missing_required_parameter"},
		{"duplicate custom_id", ok + "\n\n" + ok, 3, "duplicate_custom_id"},
		{"url mismatch", `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}}`, 1, "mismatched_endpoint"},
		{"method not POST", `{"custom_id":"a","method":"GET","url":"/v1/chat/completions","body":{}}`, 1, "invalid_method"},
		{"body not object", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":"x"}`, 1, "missing_required_parameter"},
		{"too deep", strings.Repeat("[", 300), 1, "invalid_json_line"},
		{"repeated custom_id member", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{},"custom_id":"b"}`, 1, "invalid_json_line"},
		{"repeated body member", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"x","model":"y"},"body":{}}`, 1, "invalid_json_line"},
		{"repeated escaped url member", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","\u0075rl":"/v1/embeddings","body":{}}`, 1, "invalid_json_line"},
		{"empty", "\n\n", 0, "empty_file"},
	}
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := e.create(t, e.engine, e.upload(t, []byte(tc.input)), nil)
			b = e.wait(t, e.engine, b.ID, StatusFailed)
			if b.Errors == nil || len(b.Errors.Data) != 1 || b.Errors.Object != "list" || b.FailedAt == nil {
				t.Fatalf("errors %+v", b.Errors)
			}
			d := b.Errors.Data[0]
			if d.Code != tc.code || (tc.line != 0 && (d.Line == nil || *d.Line != tc.line)) {
				t.Fatalf("error %+v (line %v)", d, d.Line)
			}
			if tc.line != 0 && !strings.Contains(d.Message, fmt.Sprintf("line %d", tc.line)) {
				t.Fatalf("message does not name the line: %q", d.Message)
			}
		})
	}
	if e.runner.count() != 0 {
		t.Fatalf("runner called for invalid batches: %d", e.runner.count())
	}
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	fine, _ := e.files.Create(context.Background(), e.caller.WorkspaceID, "x", "fine-tune", []byte("x"))
	other, _ := e.files.Create(context.Background(), "ws-2", "x", "batch", chatLines(1))
	for _, tc := range []struct{ name, body, param string }{
		{"bad window", `{"input_file_id":"f","endpoint":"/v1/chat/completions","completion_window":"1h"}`, "completion_window"},
		{"unknown file", `{"input_file_id":"file-gw00000000000000000000000000000000","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "input_file_id"},
		{"wrong purpose", `{"input_file_id":"` + fine.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "input_file_id"},
		{"other workspace's file", `{"input_file_id":"` + other.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`, "input_file_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.engine.Create(context.Background(), e.caller, nil, []byte(tc.body))
			ae := apierror.As(err)
			if err == nil || ae.Status != 400 || ae.Param != tc.param {
				t.Fatalf("%v", err)
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1})
	defer e.engine.Stop()
	// The first line takes "25 hours" on the injected clock.
	e.runner.hook = func(context.Context, []byte) error { e.clock.Add(25 * time.Hour); return nil }
	b := e.create(t, e.engine, e.upload(t, chatLines(3)), nil)
	b = e.wait(t, e.engine, b.ID, StatusExpired)
	if e.runner.count() != 1 || b.RequestCounts != (RequestCounts{3, 1, 2}) || b.ExpiredAt == nil {
		t.Fatalf("expired %+v after %d calls", b, e.runner.count())
	}
	errs := e.fileLines(t, b.ErrorFileID)
	if len(errs) != 2 || errs[0].Get("error.code").Str != "batch_expired" || len(e.fileLines(t, b.OutputFileID)) != 1 {
		t.Fatalf("error lines %v", errs)
	}
}

func TestRestartResume(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1, CheckpointEvery: 1})
	third := make(chan struct{})
	e.runner.hook = func(ctx context.Context, body []byte) error {
		if gjson.GetBytes(body, "n").Int() == 3 {
			close(third)
			<-ctx.Done() // the process "dies" while line 3 runs
			return ctx.Err()
		}
		return nil
	}
	b := e.create(t, e.engine, e.upload(t, chatLines(5)), http.Header{"X-Gateway-Virtual-Key": {"anthropic-vk"}, "X-Gateway-Api-Key": {"gw-secret"}})
	<-third
	e.engine.Stop()
	raw, _ := e.kv.Load(context.Background(), e.engine.key(e.caller.WorkspaceID, b.ID))
	if strings.Contains(string(raw), "gw-secret") || gjson.GetBytes(raw, "batch.status").Str != StatusInProgress {
		t.Fatalf("stored record: %s", raw)
	}

	first := e.runner
	e.runner = &fakeRunner{}
	eng2 := e.newEngine(Config{})
	defer eng2.Stop()
	b = e.wait(t, eng2, b.ID, StatusCompleted)
	if b.RequestCounts != (RequestCounts{5, 5, 0}) {
		t.Fatalf("resumed counts %+v", b.RequestCounts)
	}
	resumed := append([]string(nil), e.runner.calls...)
	sort.Strings(resumed)
	if got := strings.Join(resumed, ","); got != "3,4,5" {
		t.Fatalf("resumed engine ran lines %s (first ran %v)", got, first.calls)
	}
	if e.runner.header.Get("X-Gateway-Virtual-Key") != "anthropic-vk" || e.runner.header.Get("X-Gateway-Api-Key") != "" {
		t.Fatalf("resumed header %v", e.runner.header)
	}
	out := e.fileLines(t, b.OutputFileID)
	ids := map[string]bool{}
	for _, l := range out {
		ids[l.Get("custom_id").Str] = true
	}
	if len(out) != 5 || len(ids) != 5 {
		t.Fatalf("output lines %d unique %d", len(out), len(ids))
	}
}

func TestRestartNotResumable(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1, CheckpointEvery: 1})
	second := make(chan struct{})
	e.runner.hook = func(ctx context.Context, body []byte) error {
		if gjson.GetBytes(body, "n").Int() == 2 {
			close(second)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	b := e.create(t, e.engine, e.upload(t, chatLines(3)), http.Header{"X-Gateway-Api-Key": {"k"}, "Authorization": {"Bearer sk-provider"}, "X-Gateway-Provider": {"anthropic"}})
	<-second
	e.engine.Stop()
	raw, _ := e.kv.Load(context.Background(), e.engine.key(e.caller.WorkspaceID, b.ID))
	if strings.Contains(string(raw), "sk-provider") {
		t.Fatalf("provider key stored: %s", raw)
	}
	e.runner = &fakeRunner{}
	eng2 := e.newEngine(Config{})
	defer eng2.Stop()
	b = e.wait(t, eng2, b.ID, StatusFailed)
	if b.Errors == nil || b.Errors.Data[0].Code != "gateway_restarted" || e.runner.count() != 0 {
		t.Fatalf("not resumable: %+v", b)
	}
	if out := e.fileLines(t, b.OutputFileID); len(out) != 1 || out[0].Get("custom_id").Str != "req-1" {
		t.Fatalf("partial output %v", out)
	}
	// Another instance's batches are not touched by this one's Start.
	e.runner = &fakeRunner{}
	eng3 := e.newEngine(Config{Instance: "instance-2"})
	defer eng3.Stop()
}

func TestPaginationAndIsolation(t *testing.T) {
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	fid := e.upload(t, chatLines(1))
	var ids []string
	for i := 0; i < 5; i++ {
		e.clock.Add(time.Second)
		ids = append(ids, e.create(t, e.engine, fid, nil).ID)
	}
	ctx := context.Background()
	var got []string
	after := ""
	for page := 0; ; page++ {
		p, err := e.engine.List(ctx, e.caller.WorkspaceID, ListParams{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range p.Data {
			got = append(got, b.ID)
		}
		if *p.FirstID != p.Data[0].ID || *p.LastID != p.Data[len(p.Data)-1].ID {
			t.Fatalf("first/last ids %+v", p)
		}
		if !p.HasMore {
			if page != 2 {
				t.Fatalf("pages %d", page+1)
			}
			break
		}
		after = *p.LastID
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want newest first %v", got, want)
	}
	p, _ := e.engine.List(ctx, "ws-other", ListParams{})
	if len(p.Data) != 0 || p.HasMore || p.FirstID != nil {
		t.Fatalf("other workspace sees %+v", p)
	}
	if _, err := e.engine.Get(ctx, "ws-other", ids[0]); apierror.As(err).Status != 404 {
		t.Fatalf("other workspace get: %v", err)
	}
	if _, err := e.engine.Cancel(ctx, "ws-other", ids[0]); apierror.As(err).Status != 404 {
		t.Fatalf("other workspace cancel: %v", err)
	}
	for _, id := range ids {
		e.wait(t, e.engine, id, StatusCompleted)
	}
	js, _ := json.Marshal(p)
	if !strings.Contains(string(js), `"data":[]`) {
		t.Fatalf("empty list JSON %s", js)
	}
}

// testRoute is the route key the tests' runner is registered under.
const testRoute = "test-route"

// TestLineBodyRepeatRuns: a member repeated inside a line's body leaves
// the line valid (the pipeline's strict reading refuses that body, in
// the error file, as it refuses a direct call), while the line's own
// members are read strictly.
func TestLineBodyRepeatRuns(t *testing.T) {
	const line = `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","model":"o3"}}`
	l, code, _, _ := parseLine([]byte(line), "/v1/chat/completions")
	if code != "" || l.CustomID != "a" || string(l.Body) != `{"model":"gpt-4o-mini","model":"o3"}` {
		t.Fatalf("parseLine = %+v, %q", l, code)
	}
	for _, bad := range []string{
		`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"x","model":"y"},"custom_id":"b"}`,
		`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"x","model":"y"},"body":{}}`,
		`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"x","model":"y"},}`,
	} {
		if _, code, _, _ := parseLine([]byte(bad), "/v1/chat/completions"); code != "invalid_json_line" {
			t.Errorf("parseLine(%s) = %q", bad, code)
		}
	}
}
