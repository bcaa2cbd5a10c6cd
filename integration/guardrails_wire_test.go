package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// hookResults is the hook_results object as clients read it.
type hookResults struct {
	Before []hookResult `json:"before_request_hooks"`
	After  []hookResult `json:"after_request_hooks"`
}

type hookResult struct {
	Verdict     bool   `json:"verdict"`
	ID          string `json:"id"`
	Type        string `json:"type"`
	Deny        bool   `json:"deny"`
	Async       bool   `json:"async"`
	Transformed bool   `json:"transformed"`
	Skipped     bool   `json:"skipped"`
	Feedback    *struct {
		Value    *float64       `json:"value"`
		Weight   *float64       `json:"weight"`
		Metadata map[string]any `json:"metadata"`
	} `json:"feedback"`
	Checks []struct {
		Verdict bool   `json:"verdict"`
		ID      string `json:"id"`
		Error   *struct {
			Name string `json:"name"`
		} `json:"error"`
	} `json:"checks"`
}

// guardConfig is a single-target config to up with extra fields (hooks).
func guardConfig(up *fakeOpenAI, extra string) string {
	return target(up, extra)
}

// guardClient is the OpenAI SDK sending config.
func guardClient(t testing.TB, config string, headers ...string) openai.Client {
	t.Helper()
	return newClient(append([]string{"x-gateway-config", compactJSON(t, config)}, headers...)...)
}

// resultsOf reads hook_results from a JSON body.
func resultsOf(t testing.TB, body []byte) hookResults {
	t.Helper()
	var v struct {
		HookResults *hookResults `json:"hook_results"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.HookResults == nil {
		t.Fatalf("no hook_results in %s (%v)", body, err)
	}
	return *v.HookResults
}

// sdkDenial sends a chat completion through the SDK, which must fail with
// a 446, and returns the SDK's error and the results its body carried.
func sdkDenial(t *testing.T, client openai.Client) (*openai.Error, hookResults) {
	t.Helper()
	_, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an API error, got %v", err)
	}
	if apiErr.StatusCode != 446 {
		t.Fatalf("status %d, want 446", apiErr.StatusCode)
	}
	body, _ := io.ReadAll(apiErr.Response.Body)
	return apiErr, resultsOf(t, body)
}

const denyHi = `{"id":"no-hi","deny":true,"checks":[{"id":"default.regexMatch","parameters":{"rule":"hi","not":true}}]}`

// TestGuardrailsInputDeny: a failing input guardrail with deny answers
// 446 in the OpenAI envelope with hook_results, and the provider is never
// called; the log line carries the results.
func TestGuardrailsInputDeny(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	metricsBefore := scrapeMetrics(t)
	client := guardClient(t, guardConfig(up, `"before_request_hooks":[`+denyHi+`]`), "x-gateway-trace-id", "guard-deny-1")
	apiErr, hr := sdkDenial(t, client)
	verdicts := `llm_gateway_guardrail_verdicts_total{check="default.regexMatch",stage="input",verdict="fail"}`
	if got := scrapeMetrics(t)[verdicts] - metricsBefore[verdicts]; got != 1 {
		t.Fatalf("%s grew by %v, want 1", verdicts, got)
	}
	if apiErr.Type != "hooks_failed" || !strings.Contains(apiErr.Message, "hook_results") || apiErr.Code != "" || apiErr.Param != "" {
		t.Fatalf("envelope: type %q message %q code %q param %q", apiErr.Type, apiErr.Message, apiErr.Code, apiErr.Param)
	}
	if len(hr.Before) != 1 || hr.Before[0].ID != "no-hi" || hr.Before[0].Verdict || !hr.Before[0].Deny || len(hr.After) != 0 {
		t.Fatalf("hook_results = %+v", hr)
	}
	if c := hr.Before[0].Checks; len(c) != 1 || c[0].ID != "default.regexMatch" || c[0].Verdict {
		t.Fatalf("checks = %+v", c)
	}
	if n := up.count(); n != 0 {
		t.Fatalf("provider called %d times", n)
	}
	line := logLineFor(t, "guard-deny-1")
	if !strings.Contains(line, `"status":446`) || !strings.Contains(line, `"hook_results":{"before_request_hooks":[{"verdict":false,"id":"no-hi"`) {
		t.Fatalf("log line lacks status or hook_results: %s", line)
	}
}

// TestGuardrailsVerdicts: deny at the top level and inside on_fail both
// deny; a failure without deny is a 246 with the answer; passing checks
// keep 200; either way the answer carries hook_results.
func TestGuardrailsVerdicts(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	check := `"checks":[{"id":"default.regexMatch","parameters":{"rule":"hi","not":true}}]`
	cases := []struct {
		name    string
		hooks   string
		status  int
		calls   int
		verdict bool
	}{
		{"top-level deny", `"before_request_hooks":[{"id":"h","deny":true,` + check + `}]`, 446, 0, false},
		{"on_fail deny", `"before_request_hooks":[{"id":"h","on_fail":{"deny":true},` + check + `}]`, 446, 0, false},
		{"shorthand deny", `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true},"deny":true}]`, 446, 0, false},
		{"fail without deny", `"before_request_hooks":[{"id":"h",` + check + `}]`, 246, 1, false},
		{"on_fail deny false", `"before_request_hooks":[{"id":"h","on_fail":{"deny":false},` + check + `}]`, 246, 1, false},
		{"pass", `"input_guardrails":[{"default.wordCount":{"minWords":1,"maxWords":10},"deny":true}]`, 200, 1, true},
		// modelRules errors when no rule matches the request's metadata
		// (bad parameters are refused with a 400 instead).
		{"erroring check passes", `"input_guardrails":[{"default.modelRules":{"rules":{"metadata":{"team":{"a":["x"]}}}},"deny":true}]`, 200, 1, true},
		{"failOnError", `"input_guardrails":[{"default.modelRules":{"rules":{"metadata":{"team":{"a":["x"]}}},"failOnError":true},"deny":true}]`, 446, 0, false},
		{"output deny", `"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"},"deny":true}]`, 446, 1, false},
		{"output fail", `"output_guardrails":[{"default.contains":{"words":["Hello"],"operator":"none"}}]`, 246, 1, false},
		{"output pass", `"after_request_hooks":[{"id":"o","checks":[{"id":"default.endsWith","parameters":{"suffix":"!"}}]}]`, 200, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := up.count()
			resp, body := chat(t, guardConfig(up, tc.hooks))
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if n := up.count() - before; n != tc.calls {
				t.Fatalf("provider called %d times, want %d", n, tc.calls)
			}
			hr := resultsOf(t, body)
			all := append(hr.Before, hr.After...)
			if len(all) != 1 || all[0].Verdict != tc.verdict {
				t.Fatalf("hook_results = %s", body)
			}
			if tc.status == 446 {
				if !strings.Contains(string(body), `"type":"hooks_failed"`) || strings.Contains(string(body), `"choices"`) {
					t.Fatalf("446 body: %s", body)
				}
				return
			}
			if !strings.Contains(string(body), `"content":"Hello!"`) {
				t.Fatalf("answer not delivered: %s", body)
			}
		})
	}
}

// TestGuardrailsSDKSuccessStatus246: the SDK takes a 246 as the answer,
// with hook_results beside it.
func TestGuardrailsSDKSuccessStatus246(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	client := guardClient(t, guardConfig(up, `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true}}]`))
	var httpResp *http.Response
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	if httpResp.StatusCode != 246 || resp.Choices[0].Message.Content != "Hello!" {
		t.Fatalf("status %d content %q", httpResp.StatusCode, resp.Choices[0].Message.Content)
	}
	hr := resultsOf(t, []byte(resp.RawJSON()))
	if len(hr.Before) != 1 || hr.Before[0].Verdict || hr.Before[0].Deny {
		t.Fatalf("hook_results = %+v", hr)
	}
}

// TestGuardrailsOutputDenyWithholds: an output guardrail with deny
// withholds the answer the provider gave; the SDK error carries both
// stages' results.
func TestGuardrailsOutputDenyWithholds(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	client := guardClient(t, guardConfig(up, `"input_guardrails":[{"default.wordCount":{"minWords":1,"maxWords":9}}],`+
		`"output_guardrails":[{"id":"no-greetings","default.contains":{"words":["Hello"],"operator":"none"},"deny":true}]`))
	apiErr, hr := sdkDenial(t, client)
	if up.count() != 1 {
		t.Fatalf("provider called %d times, want 1", up.count())
	}
	body, _ := io.ReadAll(apiErr.Response.Body)
	if strings.Contains(string(body), "Hello!") {
		t.Fatalf("the withheld answer leaked: %s", body)
	}
	if len(hr.Before) != 1 || !hr.Before[0].Verdict || len(hr.After) != 1 || hr.After[0].ID != "no-greetings" || hr.After[0].Verdict || !hr.After[0].Deny {
		t.Fatalf("hook_results = %+v", hr)
	}
}

// TestGuardrailsFeedback: on_fail and on_success feedback objects appear
// with the check ids sorted into successful, failed and errored.
func TestGuardrailsFeedback(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	checks := `"checks":[{"id":"default.wordCount","parameters":{"minWords":1,"maxWords":5}},` +
		`{"id":"default.regexMatch","parameters":{"rule":"%s"}},{"id":"default.modelRules","parameters":{"rules":{"metadata":{"team":{"a":["x"]}}}}}]`
	fb := `"on_fail":{"feedback":{"value":-5,"weight":2,"metadata":{"team":"a"}}},"on_success":{"feedback":{"value":5,"weight":1}}`
	cases := []struct {
		name                      string
		rule                      string
		value, weight             float64
		ok, failed, errored, team string
	}{
		{"failing", "bye", -5, 2, "default.wordCount", "default.regexMatch", "default.modelRules", "a"},
		{"passing", "hi", 5, 1, "default.wordCount, default.regexMatch", "", "default.modelRules", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := chat(t, guardConfig(up, `"before_request_hooks":[{"id":"fb",`+fb+`,`+strings.Replace(checks, "%s", tc.rule, 1)+`}]`),
				"x-gateway-trace-id", "guard-fb-"+tc.name)
			if resp.StatusCode != 200 && resp.StatusCode != 246 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			hr := resultsOf(t, body)
			f := hr.Before[0].Feedback
			if f == nil || f.Value == nil || *f.Value != tc.value || f.Weight == nil || *f.Weight != tc.weight {
				t.Fatalf("feedback = %+v", f)
			}
			md := f.Metadata
			if md["successfulChecks"] != tc.ok || md["failedChecks"] != tc.failed || md["erroredChecks"] != tc.errored {
				t.Fatalf("feedback metadata = %v", md)
			}
			if team, _ := md["team"].(string); team != tc.team {
				t.Fatalf("team = %v", md["team"])
			}
			line := logLineFor(t, "guard-fb-"+tc.name)
			if !strings.Contains(line, `"feedback":{"value":`) || !strings.Contains(line, `"erroredChecks":"default.modelRules"`) {
				t.Fatalf("log line lacks the feedback: %s", line)
			}
		})
	}
}

// TestGuardrailsMutatorSeenByProvider: addPrefix and regexReplace change
// the request the provider gets, and the results say so.
func TestGuardrailsMutatorSeenByProvider(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cases := []struct {
		name, hooks, want string
	}{
		{"addPrefix", `"before_request_hooks":[{"id":"m","type":"mutator","checks":[{"id":"default.addPrefix","parameters":{"prefix":"Be brief. "}}]}]`, `"content":"Be brief. hi"`},
		{"regexReplace", `"input_guardrails":[{"default.regexReplace":{"rule":"h(i)","redactText":"[X]"}}]`, `"content":"[X]"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := chat(t, guardConfig(up, tc.hooks))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := string(up.last().Body); !strings.Contains(got, tc.want) {
				t.Fatalf("provider got %s, want %s in it", got, tc.want)
			}
			hr := resultsOf(t, body)
			if len(hr.Before) != 1 || !hr.Before[0].Transformed {
				t.Fatalf("hook_results = %s", body)
			}
		})
	}
}

// TestGuardrailsInvalidConfigs: unusable hooks are a 400 naming the hook
// and field, before any provider is called.
func TestGuardrailsInvalidConfigs(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cases := []struct {
		name, hooks, want string
	}{
		{"unknown check", `"input_guardrails":[{"default.nope":{},"deny":true}]`, `unknown check \"default.nope\"`},
		{"bad regex", `"input_guardrails":[{"id":"re","default.regexMatch":{"rule":"(?=x)"}}]`, `guardrail \"re\"`},
		{"deny not a boolean", `"before_request_hooks":[{"id":"d","deny":"yes","checks":[]}]`, `deny: must be a boolean`},
		{"unknown saved id", `"input_guardrails":["no-such-guardrail"]`, `no-such-guardrail`},
		{"output unknown check", `"output_guardrails":[{"acme.shout":{}}]`, `acme.shout`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := chat(t, guardConfig(up, tc.hooks))
			if resp.StatusCode != 400 || !strings.Contains(string(body), tc.want) {
				t.Fatalf("status %d body %s, want 400 naming %s", resp.StatusCode, body, tc.want)
			}
			if up.count() != 0 {
				t.Fatalf("provider called")
			}
		})
	}
}

// TestGuardrailsCompletions: legacy completions are judged on the prompt
// and on choices[0].text, and carry hook_results in their body.
func TestGuardrailsCompletions(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	cfg := guardConfig(up, `"input_guardrails":[{"default.regexMatch":{"rule":"^Say"}}],"output_guardrails":[{"default.endsWith":{"suffix":"world"}}]`)
	resp, body := do(t, "POST", "/completions", []byte(`{"model":"gpt-3.5-turbo-instruct","prompt":"Say hello"}`), "x-gateway-config", compactJSON(t, cfg))
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":" world"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	hr := resultsOf(t, body)
	if len(hr.Before) != 1 || !hr.Before[0].Verdict || len(hr.After) != 1 || !hr.After[0].Verdict {
		t.Fatalf("hook_results = %s", body)
	}
	resp, body = do(t, "POST", "/completions", []byte(`{"model":"gpt-3.5-turbo-instruct","prompt":"Tell me"}`), "x-gateway-config", compactJSON(t, cfg))
	if resp.StatusCode != 246 || resultsOf(t, body).Before[0].Verdict {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}
