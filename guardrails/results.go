package guardrails

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tidwall/sjson"
)

// Statuses the gateway answers with (research/portkey.md §7.3).
const (
	// StatusDenied: a failed hook with deny stopped the request or
	// withheld the answer.
	StatusDenied = 446
	// StatusFailed: a hook failed without deny; the answer is delivered.
	StatusFailed = 246
)

// DenyMessage is the reference's error message for a 446.
const DenyMessage = "The guardrail checks defined in the config failed. You can find more information in the `hook_results` object."

// HookResult is one hook's entry in hook_results (wave2.md §3.3).
type HookResult struct {
	Verdict       bool
	ID            string
	Type          string
	Checks        []CheckResult
	Transformed   bool
	Feedback      *FeedbackResult
	ExecutionTime int64 // milliseconds
	Async         bool
	Deny          bool
	CreatedAt     time.Time
	Skipped       bool
}

// MarshalJSON writes the reference's field names; a skipped hook is
// {id, type, skipped: true}.
func (h HookResult) MarshalJSON() ([]byte, error) {
	if h.Skipped {
		return json.Marshal(struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Skipped bool   `json:"skipped"`
		}{h.ID, h.Type, true})
	}
	checks := h.Checks
	if checks == nil {
		checks = []CheckResult{}
	}
	return json.Marshal(struct {
		Verdict       bool            `json:"verdict"`
		ID            string          `json:"id"`
		Type          string          `json:"type"`
		Checks        []CheckResult   `json:"checks"`
		Transformed   bool            `json:"transformed"`
		Feedback      *FeedbackResult `json:"feedback"`
		ExecutionTime int64           `json:"execution_time"`
		Async         bool            `json:"async"`
		Deny          bool            `json:"deny"`
		CreatedAt     string          `json:"created_at"`
	}{h.Verdict, h.ID, h.Type, checks, h.Transformed, h.Feedback, h.ExecutionTime, h.Async, h.Deny, jsTime(h.CreatedAt)})
}

// CheckResult is one check's entry in a HookResult.
type CheckResult struct {
	Verdict       bool
	ID            string
	Data          any
	Error         *CheckError
	ExecutionTime int64 // milliseconds
	Transformed   bool
	CreatedAt     time.Time
	Log           any
	FailOnError   bool
}

// MarshalJSON writes the reference's field names.
func (c CheckResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Verdict       bool        `json:"verdict"`
		ID            string      `json:"id"`
		Data          any         `json:"data"`
		Error         *CheckError `json:"error,omitempty"`
		ExecutionTime int64       `json:"execution_time"`
		Transformed   bool        `json:"transformed"`
		CreatedAt     string      `json:"created_at"`
		Log           any         `json:"log"`
		FailOnError   bool        `json:"fail_on_error"`
	}{c.Verdict, c.ID, c.Data, c.Error, c.ExecutionTime, c.Transformed, jsTime(c.CreatedAt), c.Log, c.FailOnError})
}

// CheckError is a check result's error object.
type CheckError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// FeedbackResult is the feedback object of a hook result: the config's
// on_success or on_fail feedback, its metadata extended with the ids of
// the successful, failed and errored checks (comma-space joined).
type FeedbackResult struct {
	Value    *float64       `json:"value,omitempty"`
	Weight   *float64       `json:"weight,omitempty"`
	Metadata map[string]any `json:"metadata"`
}

// jsTime formats like JavaScript's Date.prototype.toISOString.
func jsTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// HookResults is the hook_results object of an answer or log entry.
type HookResults struct {
	BeforeRequestHooks []HookResult `json:"before_request_hooks"`
	AfterRequestHooks  []HookResult `json:"after_request_hooks"`
}

// Results collects the sync results of both stages (either may be nil).
// Its arrays are never null.
func Results(before, after *Result) HookResults {
	hr := HookResults{BeforeRequestHooks: []HookResult{}, AfterRequestHooks: []HookResult{}}
	if before != nil {
		hr.BeforeRequestHooks = append(hr.BeforeRequestHooks, before.Hooks...)
	}
	if after != nil {
		hr.AfterRequestHooks = append(hr.AfterRequestHooks, after.Hooks...)
	}
	return hr
}

// denyResults is Results for a 446 body: without check data.
func denyResults(before, after *Result) HookResults {
	hr := Results(before, after)
	hr.BeforeRequestHooks = withoutData(hr.BeforeRequestHooks)
	hr.AfterRequestHooks = withoutData(hr.AfterRequestHooks)
	return hr
}

// Status is the status the client gets: 446 when a hook of either stage
// denied, 246 when one failed without deny and the provider answered
// 200, otherwise upstream.
func Status(before, after *Result, upstream int) int {
	if before.Denied() || after.Denied() {
		return StatusDenied
	}
	if (before.Failed() || after.Failed()) && upstream == http.StatusOK {
		return StatusFailed
	}
	return upstream
}

// HasResults reports whether either stage produced hook results, i.e.
// whether an answer should carry hook_results.
func HasResults(before, after *Result) bool {
	return (before != nil && len(before.Hooks) > 0) || (after != nil && len(after.Hooks) > 0)
}

// withoutData returns hr with every check's data and log left out (null):
// what a 446 tells the client. A check's data quotes what it matched
// (regexMatch's matchedText, the textExcerpt of most checks), the answer
// a denial withholds, text an operator's mutator added to the request,
// a webhook's own answer, and the check's parameters (a regexPattern
// tells a client how to evade the rule). The verdicts, check ids, errors
// and feedback say which check denied; the full results go to the log.
func withoutData(hr []HookResult) []HookResult {
	out := make([]HookResult, len(hr))
	for i, h := range hr {
		out[i] = h
		if len(h.Checks) == 0 {
			continue
		}
		out[i].Checks = make([]CheckResult, len(h.Checks))
		for j, c := range h.Checks {
			c.Data, c.Log = nil, nil
			out[i].Checks[j] = c
		}
	}
	return out
}

// DenyBody is the JSON body of a 446: the OpenAI error envelope (type
// "hooks_failed") plus hook_results, as the reference writes it, except
// that checks' data and log are null (see withoutData): the reference
// returns them, which discloses the withheld answer.
func DenyBody(before, after *Result) []byte {
	b, _ := json.Marshal(struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    any    `json:"code"`
		} `json:"error"`
		HookResults HookResults `json:"hook_results"`
	}{
		Error: struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    any    `json:"code"`
		}{Message: DenyMessage, Type: "hooks_failed"},
		HookResults: denyResults(before, after),
	})
	return b
}

// AttachResults returns body (a JSON object answer) with "hook_results"
// set. Bodies that are not JSON objects are returned unchanged.
func AttachResults(body []byte, before, after *Result) []byte {
	if len(body) == 0 || body[0] != '{' {
		return body
	}
	raw, err := json.Marshal(Results(before, after))
	if err != nil {
		return body
	}
	out, err := sjson.SetRawBytes(body, "hook_results", raw)
	if err != nil {
		return body
	}
	return out
}

// StreamEvent is the server-sent event that reports hook results on a
// stream: `data: {"hook_results":{…}}` followed by a blank line. The
// gateway sends it after the last chunk (before "data: [DONE]").
func StreamEvent(before, after *Result) []byte {
	raw, _ := json.Marshal(struct {
		HookResults HookResults `json:"hook_results"`
	}{Results(before, after)})
	out := make([]byte, 0, len(raw)+8)
	out = append(out, "data: "...)
	out = append(out, raw...)
	return append(out, "\n\n"...)
}
