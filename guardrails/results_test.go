package guardrails_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

func keys(r gjson.Result) []string {
	var out []string
	r.ForEach(func(k, _ gjson.Result) bool { out = append(out, k.Str); return true })
	sort.Strings(out)
	return out
}

// TestHookResultsShape pins the field names of wave2.md §3.3.
func TestHookResultsShape(t *testing.T) {
	rn := &guardrails.Runner{}
	before, err := rn.Before(context.Background(), hooks(`{"id":"in","deny":true,"on_fail":{"feedback":{"value":-1}},`+hasDigits+`}`), chat("abc"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(guardrails.Results(before, nil))
	hr := gjson.ParseBytes(b)
	if got := keys(hr); !reflect.DeepEqual(got, []string{"after_request_hooks", "before_request_hooks"}) {
		t.Fatalf("hook_results keys %v", got)
	}
	if !hr.Get("after_request_hooks").IsArray() || len(hr.Get("after_request_hooks").Array()) != 0 {
		t.Fatalf("after_request_hooks must be [] not null: %s", b)
	}
	h := hr.Get("before_request_hooks.0")
	wantHook := []string{"async", "checks", "created_at", "deny", "execution_time", "feedback", "id", "transformed", "type", "verdict"}
	if got := keys(h); !reflect.DeepEqual(got, wantHook) {
		t.Fatalf("hook keys %v", got)
	}
	c := h.Get("checks.0")
	wantCheck := []string{"created_at", "data", "execution_time", "fail_on_error", "id", "log", "transformed", "verdict"}
	if got := keys(c); !reflect.DeepEqual(got, wantCheck) {
		t.Fatalf("check keys %v", got)
	}
	if h.Get("verdict").Type != gjson.False || h.Get("deny").Type != gjson.True || h.Get("type").Str != "guardrail" ||
		c.Get("id").Str != "default.regexMatch" || h.Get("feedback.metadata.failedChecks").Str != "default.regexMatch" {
		t.Fatalf("hook %s", h.Raw)
	}
	if ts := h.Get("created_at").Str; len(ts) != 24 || !strings.HasSuffix(ts, "Z") {
		t.Fatalf("created_at %q is not an ISO timestamp", ts)
	}
}

func TestDenyBodyAndStatus(t *testing.T) {
	rn := &guardrails.Runner{}
	deny, _ := rn.Before(context.Background(), hooks(`{"id":"in","deny":true,`+hasDigits+`}`), chat("abc"))
	flag, _ := rn.Before(context.Background(), hooks(`{"id":"in",`+hasDigits+`}`), chat("abc"))
	ok, _ := rn.Before(context.Background(), hooks(`{"id":"in",`+hasDigits+`}`), chat("abc 1"))
	outFail, _ := rn.After(context.Background(), hooks(`{"id":"out",`+hasDigits+`}`), chat("q"), answer("none"))

	body := gjson.ParseBytes(guardrails.DenyBody(deny, nil))
	if body.Get("error.type").Str != "hooks_failed" || body.Get("error.message").Str != guardrails.DenyMessage ||
		body.Get("error.param").Type != gjson.Null || body.Get("error.code").Type != gjson.Null ||
		body.Get("hook_results.before_request_hooks.0.id").Str != "in" || !body.Get("hook_results.after_request_hooks").IsArray() {
		t.Fatalf("deny body %s", body.Raw)
	}
	tests := []struct {
		name          string
		before, after *guardrails.Result
		upstream      int
		want          int
	}{
		{"deny", deny, nil, 200, 446},
		{"fail without deny", flag, nil, 200, 246},
		{"after fail", ok, outFail, 200, 246},
		{"fail but provider error keeps its status", flag, nil, 500, 500},
		{"pass", ok, nil, 200, 200},
		{"no hooks", nil, nil, 201, 201},
	}
	for _, tc := range tests {
		if got := guardrails.Status(tc.before, tc.after, tc.upstream); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}

	ans := answer("hi").Body
	withResults := gjson.ParseBytes(guardrails.AttachResults(ans, ok, outFail))
	if withResults.Get("id").Str != "x" || withResults.Get("hook_results.before_request_hooks.0.id").Str != "in" ||
		withResults.Get("hook_results.after_request_hooks.0.id").Str != "out" {
		t.Fatalf("attached %s", withResults.Raw)
	}
	if got := guardrails.AttachResults([]byte("[1]"), ok, nil); string(got) != "[1]" {
		t.Fatal("non-object bodies are left alone")
	}
	ev := string(guardrails.StreamEvent(ok, outFail))
	if !strings.HasPrefix(ev, `data: {"hook_results":{"before_request_hooks":[{`) || !strings.HasSuffix(ev, "}\n\n") {
		t.Fatalf("stream event %q", ev)
	}
}

// TestDenyBodyWithholdsData: a 446 names the hook and check that denied
// and their verdicts, but none of the checks' data: not the withheld
// answer (matchedText, textExcerpt), not the rule. The results kept for
// the log still have the data.
func TestDenyBodyWithholdsData(t *testing.T) {
	rn := &guardrails.Runner{}
	const secret = "the launch code is 0000-1234"
	in, _ := rn.Before(context.Background(), hooks(`{"id":"in","deny":true,"default.regexMatch":{"rule":"launch code","not":true}}`), chat(secret))
	out, _ := rn.After(context.Background(), hooks(`{"id":"out","deny":true,"checks":[{"id":"default.regexMatch","parameters":{"rule":"\\d{4}-\\d{4}","not":true}},{"id":"default.wordCount","parameters":{"minWords":1,"maxWords":100}}]}`), chat("q"), answer(secret))
	for name, tc := range map[string]struct{ before, after *guardrails.Result }{"input": {in, nil}, "output": {nil, out}} {
		body := guardrails.DenyBody(tc.before, tc.after)
		for _, leak := range []string{"launch", "1234", `\\d{4}`, "matchedText", "textExcerpt", "regexPattern"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("%s: the 446 body discloses %q: %s", name, leak, body)
			}
		}
		r := gjson.ParseBytes(body).Get("hook_results")
		h := r.Get("before_request_hooks.0")
		if name == "output" {
			h = r.Get("after_request_hooks.0")
		}
		if !h.Get("deny").Bool() || h.Get("verdict").Bool() || h.Get("checks.0.id").Str != "default.regexMatch" ||
			h.Get("checks.0.verdict").Bool() || h.Get("checks.0.data").Type != gjson.Null || h.Get("feedback").Exists() && h.Get("feedback").Type != gjson.Null {
			t.Errorf("%s: hook %s", name, h.Raw)
		}
	}
	logged, _ := json.Marshal(guardrails.Results(nil, out))
	if !strings.Contains(string(logged), "0000-1234") {
		t.Errorf("the logged results lost the check data: %s", logged)
	}
}
