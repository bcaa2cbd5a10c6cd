package guardrails_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails/checks"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// boom is a test check that always errors (llm.checks.test_boom).
type boom struct{}

func (boom) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "llm.checks.test_boom", New: func() caddy.Module { return new(boom) }}
}

func (boom) Check(context.Context, *guardrails.Input, json.RawMessage) (guardrails.Verdict, error) {
	return guardrails.Verdict{}, errors.New("kaboom")
}

// panicky panics (llm.checks.test_panic).
type panicky struct{}

func (panicky) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "llm.checks.test_panic", New: func() caddy.Module { return new(panicky) }}
}

func (panicky) Check(context.Context, *guardrails.Input, json.RawMessage) (guardrails.Verdict, error) {
	panic("check bug")
}

func init() {
	caddy.RegisterModule(boom{})
	caddy.RegisterModule(panicky{})
}

func chat(text string) *guardrails.Request {
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": text}}})
	return &guardrails.Request{Body: b, Type: "chatComplete", Provider: "openai", Model: "gpt-4o"}
}

func answer(text string) *guardrails.Answer {
	b, _ := json.Marshal(map[string]any{"id": "x", "choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": text}}}})
	return &guardrails.Answer{Body: b, Status: 200}
}

func hooks(js ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(js))
	for i, j := range js {
		out[i] = json.RawMessage(j)
	}
	return out
}

const (
	hasDigits = `"checks":[{"id":"default.regexMatch","parameters":{"rule":"\\d"}}]`
	fewWords  = `"checks":[{"id":"default.wordCount","parameters":{"minWords":1,"maxWords":3}}]`
)

func TestVerdictAndDeny(t *testing.T) {
	tests := []struct {
		name           string
		hook           string
		text           string
		verdict, deny  bool
		denied, failed bool
	}{
		{"pass", `{"id":"h",` + hasDigits + `}`, "abc 1", true, false, false, false},
		{"fail without deny", `{"id":"h",` + hasDigits + `}`, "abc", false, false, false, true},
		{"fail with on_fail.deny", `{"id":"h","on_fail":{"deny":true},` + hasDigits + `}`, "abc", false, true, true, true},
		{"fail with top-level deny", `{"id":"h","deny":true,` + hasDigits + `}`, "abc", false, true, true, true},
		{"pass with top-level deny", `{"id":"h","deny":true,` + hasDigits + `}`, "abc 1", true, false, false, false},
		{"pass with on_success.deny", `{"id":"h","on_success":{"deny":true},` + hasDigits + `}`, "abc 1", true, true, true, false},
		{"shorthand", `{"default.regexMatch":{"rule":"\\d"},"deny":true}`, "abc", false, true, true, true},
		{"shorthand bare name", `{"wordCount":{"minWords":1,"maxWords":3}}`, "a b c d", false, false, false, true},
		{"erroring check passes", `{"id":"h","deny":true,"checks":[{"id":"test_boom","parameters":{}}]}`, "x", true, false, false, false},
		{"erroring check with failOnError", `{"id":"h","deny":true,"checks":[{"id":"test_boom","parameters":{"failOnError":true}}]}`, "x", false, true, true, true},
		{"panicking check is a check error", `{"id":"h","checks":[{"id":"test_panic","parameters":{}}]}`, "x", true, false, false, false},
		{"disabled check", `{"id":"h","deny":true,"checks":[{"id":"default.regexMatch","parameters":{"rule":"\\d"},"is_enabled":false}]}`, "abc", true, false, false, false},
		{"no checks passes", `{"id":"h","deny":true}`, "abc", true, false, false, false},
	}
	rn := &guardrails.Runner{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := rn.Before(context.Background(), hooks(tc.hook), chat(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			hr := res.Hooks[0]
			if hr.Verdict != tc.verdict || hr.Deny != tc.deny || res.Denied() != tc.denied || res.Failed() != tc.failed {
				t.Fatalf("verdict %v deny %v denied %v failed %v; want %v %v %v %v",
					hr.Verdict, hr.Deny, res.Denied(), res.Failed(), tc.verdict, tc.deny, tc.denied, tc.failed)
			}
		})
	}
}

func TestCheckErrorShape(t *testing.T) {
	rn := &guardrails.Runner{}
	res, _ := rn.Before(context.Background(), hooks(`{"id":"h","checks":[{"id":"test_panic","parameters":{}},{"id":"test_boom","parameters":{"failOnError":true}}]}`), chat("x"))
	c0, c1 := res.Hooks[0].Checks[0], res.Hooks[0].Checks[1]
	if c0.Verdict || c0.Error == nil || *c0.Error != (guardrails.CheckError{Name: "Check error", Message: "Error executing check"}) {
		t.Fatalf("panic result %+v", c0)
	}
	if c1.Error == nil || c1.Error.Message != "kaboom" || !c1.FailOnError {
		t.Fatalf("error result %+v", c1)
	}
}

func TestFeedback(t *testing.T) {
	hook := `{"id":"fb","on_success":{"feedback":{"value":1,"weight":0.5,"metadata":{"team":"a"}}},
		"on_fail":{"feedback":{"value":-1,"weight":1}},
		"checks":[{"id":"default.regexMatch","parameters":{"rule":"\\d"}},
		          {"id":"default.wordCount","parameters":{"minWords":1,"maxWords":3}},
		          {"id":"test_boom","parameters":{}}]}`
	rn := &guardrails.Runner{}
	tests := []struct {
		text                      string
		value                     float64
		successful, failed, errед string
	}{
		{"a 1", 1, "default.regexMatch, default.wordCount", "", "test_boom"},
		{"a b c d", -1, "", "default.regexMatch, default.wordCount", "test_boom"},
	}
	for _, tc := range tests {
		res, err := rn.Before(context.Background(), hooks(hook), chat(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		fb := res.Hooks[0].Feedback
		if fb == nil || *fb.Value != tc.value {
			t.Fatalf("%q: feedback %+v", tc.text, fb)
		}
		md := fb.Metadata
		if md["successfulChecks"] != tc.successful || md["failedChecks"] != tc.failed || md["erroredChecks"] != tc.errед {
			t.Fatalf("%q: metadata %v", tc.text, md)
		}
		if tc.value == 1 && md["team"] != "a" {
			t.Fatalf("user metadata lost: %v", md)
		}
	}
	res, _ := rn.Before(context.Background(), hooks(`{"id":"h",`+hasDigits+`}`), chat("x"))
	if res.Hooks[0].Feedback != nil {
		t.Fatal("no feedback configured must give null")
	}
}

func TestSkippedHooks(t *testing.T) {
	rn := &guardrails.Runner{}
	h := hooks(`{"id":"h","deny":true,` + hasDigits + `}`)
	embed := &guardrails.Request{Body: []byte(`{"input":"abc"}`), Type: "embed"}
	tests := []struct {
		name  string
		run   func() (*guardrails.Result, error)
		skips bool
	}{
		{"embed before runs", func() (*guardrails.Result, error) { return rn.Before(context.Background(), h, embed) }, false},
		{"embed after skipped", func() (*guardrails.Result, error) {
			return rn.After(context.Background(), h, embed, &guardrails.Answer{Body: []byte(`{}`), Status: 200})
		}, true},
		{"images skipped", func() (*guardrails.Result, error) {
			return rn.Before(context.Background(), h, &guardrails.Request{Body: []byte(`{}`), Type: "imageGenerate"})
		}, true},
		{"non-200 answer skipped", func() (*guardrails.Result, error) {
			a := answer("abc")
			a.Status = 500
			return rn.After(context.Background(), h, chat("x"), a)
		}, true},
		{"embed mutator skipped", func() (*guardrails.Result, error) {
			return rn.Before(context.Background(), hooks(`{"id":"m","type":"mutator","checks":[{"id":"default.addPrefix","parameters":{"prefix":"p"}}]}`), embed)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.run()
			if err != nil {
				t.Fatal(err)
			}
			if res.Hooks[0].Skipped != tc.skips {
				t.Fatalf("skipped %v, want %v", res.Hooks[0].Skipped, tc.skips)
			}
			if tc.skips && (res.Denied() || res.Failed()) {
				t.Fatal("a skipped hook must not deny or fail")
			}
			if tc.skips {
				b, _ := json.Marshal(res.Hooks[0])
				if string(b) != `{"id":"`+res.Hooks[0].ID+`","type":"`+res.Hooks[0].Type+`","skipped":true}` {
					t.Fatalf("skipped JSON %s", b)
				}
			}
		})
	}
}

func TestMutatorsRunFirstAndTransform(t *testing.T) {
	rn := &guardrails.Runner{}
	// The guardrail comes first in the config but judges the prefixed text.
	res, err := rn.Before(context.Background(), hooks(
		`{"id":"g","deny":true,"checks":[{"id":"default.regexMatch","parameters":{"rule":"^SAFE: "}}]}`,
		`{"id":"m","type":"mutator","checks":[{"id":"default.addPrefix","parameters":{"prefix":"SAFE: "}}]}`,
	), chat("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Denied() || !res.Transformed || gjson.GetBytes(res.Body, "messages.0.content").Str != "SAFE: hello" {
		t.Fatalf("denied %v transformed %v body %s", res.Denied(), res.Transformed, res.Body)
	}
	if res.Hooks[0].ID != "g" || res.Hooks[1].ID != "m" || !res.Hooks[1].Transformed || res.Hooks[0].Transformed {
		t.Fatalf("results order/flags: %+v", res.Hooks)
	}
	if !res.Hooks[1].Checks[0].Transformed {
		t.Fatal("check transformed flag")
	}
}

func TestAfterTransformAndStream(t *testing.T) {
	rn := &guardrails.Runner{}
	res, err := rn.After(context.Background(), hooks(`{"id":"r","default.regexReplace":{"rule":"/\\d+/g"}}`), chat("q"), answer("card 4111"))
	if err != nil || !res.Transformed || gjson.GetBytes(res.Body, "choices.0.message.content").Str != "card [REDACTED]" {
		t.Fatalf("%v %s", err, res.Body)
	}
	// A stream is judged on its assembled text.
	stream := &guardrails.Answer{Text: "no digits here", Status: 200}
	req := chat("q")
	req.Type, req.Stream = "stream-chatComplete", true
	res, err = rn.After(context.Background(), hooks(`{"id":"s","deny":true,`+hasDigits+`}`), req, stream)
	if err != nil || !res.Denied() {
		t.Fatalf("stream: %v denied=%v", err, res.Denied())
	}
}

func TestAsyncHooks(t *testing.T) {
	rn := &guardrails.Runner{}
	res, err := rn.After(context.Background(), hooks(
		`{"id":"sync",`+hasDigits+`}`,
		`{"id":"bg","async":true,"deny":true,`+fewWords+`}`,
		`{"id":"bgm","type":"mutator","async":true,"checks":[{"id":"default.regexReplace","parameters":{"rule":"a"}}]}`,
	), chat("q"), answer("one two three four 5"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hooks) != 1 || res.Hooks[0].ID != "sync" || res.Denied() || !res.HasAsync() {
		t.Fatalf("sync part: %+v denied=%v async=%v", res.Hooks, res.Denied(), res.HasAsync())
	}
	var got []guardrails.HookResult
	res.RunAsync(context.Background(), func(r []guardrails.HookResult) { got = r })
	if len(got) != 2 || got[0].ID != "bg" || got[0].Verdict || !got[0].Async || got[0].Deny || !got[1].Skipped {
		t.Fatalf("async results %+v", got)
	}
}

func TestCompileErrors(t *testing.T) {
	saved := map[string]*guardrails.Hook{}
	h, err := guardrails.Compile(json.RawMessage(`{"default.contains":{"words":["x"],"operator":"any"},"deny":true}`), "pg-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	saved["pg-1"] = h
	rn := &guardrails.Runner{Saved: func(id string) (*guardrails.Hook, bool) { g, ok := saved[id]; return g, ok }}
	tests := []struct {
		name string
		hook string
		want []string
	}{
		{"unknown check", `{"id":"h","checks":[{"id":"acme.pii","parameters":{}}]}`, []string{`guardrail "h"`, "checks[0]", `unknown check "acme.pii"`}},
		{"bad regex", `{"id":"h","default.regexMatch":{"rule":"(?!x)"}}`, []string{`guardrail "h"`, `["default.regexMatch"]`, "RE2"}},
		{"unknown saved id", `"pg-missing"`, []string{`guardrail "pg-missing"`, "no saved guardrail"}},
		{"bad type", `{"id":"h","type":"filter"}`, []string{"type"}},
		{"shorthand non-object", `{"id":"h","default.contains":"x"}`, []string{`["default.contains"]`}},
		{"deep JSON", strings.Repeat("[", 200) + strings.Repeat("]", 200), []string{"nesting"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rn.Before(context.Background(), hooks(tc.hook), chat("x"))
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
				t.Fatalf("err %v, want a 400", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(ae.Message, w) {
					t.Fatalf("message %q lacks %q", ae.Message, w)
				}
			}
		})
	}
	res, err := rn.Before(context.Background(), hooks(`"pg-1"`), chat("y"))
	if err != nil || !res.Denied() || res.Hooks[0].ID != "pg-1" {
		t.Fatalf("saved guardrail: %v %+v", err, res)
	}
}

func TestCompileCache(t *testing.T) {
	rn := &guardrails.Runner{}
	a, err := rn.Compile(guardrails.BeforeRequest, hooks(`{"id":"h",`+hasDigits+`}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := rn.Compile(guardrails.BeforeRequest, hooks(`{"id":"h",`+hasDigits+`}`))
	c, _ := rn.Compile(guardrails.BeforeRequest, hooks(`{"id":"h2",`+hasDigits+`}`))
	if a[0] != b[0] || a[0] == c[0] {
		t.Fatal("same JSON must reuse the compiled hook, different JSON must not")
	}
	d, _ := rn.Compile(guardrails.BeforeRequest, hooks(`{"default.regexMatch":{"rule":"x"}}`))
	e, _ := rn.Compile(guardrails.AfterRequest, hooks(`{"default.regexMatch":{"rule":"x"}}`))
	if !strings.HasPrefix(d[0].ID, "input_guardrail_") || !strings.HasPrefix(e[0].ID, "output_guardrail_") {
		t.Fatalf("generated ids %q %q", d[0].ID, e[0].ID)
	}
}

func TestNoHooks(t *testing.T) {
	rn := &guardrails.Runner{}
	req := chat("x")
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		b, _ := rn.Before(ctx, nil, req)
		a, _ := rn.After(ctx, nil, req, nil)
		if b.Denied() || a.Failed() || b.HasAsync() || guardrails.Status(b, a, 200) != 200 || guardrails.HasResults(b, a) {
			t.Fatal("nil results must report nothing")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations with no hooks", allocs)
	}
}

// TestRemoteChecksConcurrently runs two webhook checks of one hook
// concurrently (under -race this also checks the shared input).
func TestRemoteChecksConcurrently(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"verdict":` + strconv.FormatBool(r.URL.Path == "/yes") + `}`))
	}))
	defer srv.Close()
	g, _ := upstream.NewGuard([]string{"loopback"})
	rn := &guardrails.Runner{Env: guardrails.Env{Client: guardrails.NewEgressClient(g)}}
	res, err := rn.Before(context.Background(), hooks(`{"id":"w","deny":true,"checks":[
		{"id":"default.webhook","parameters":{"webhookURL":"`+srv.URL+`/yes"}},
		{"id":"default.webhook","parameters":{"webhookURL":"`+srv.URL+`/no"}},
		{"id":"default.wordCount","parameters":{"minWords":1,"maxWords":9}}]}`), chat("hello there"))
	if err != nil {
		t.Fatal(err)
	}
	c := res.Hooks[0].Checks
	if !c[0].Verdict || c[1].Verdict || !c[2].Verdict || !res.Denied() {
		t.Fatalf("checks %+v", c)
	}
}
