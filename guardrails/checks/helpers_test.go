package checks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// chatReq is a chat request whose last user message is text.
func chatReq(text string) []byte {
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": "sys"},
		map[string]any{"role": "user", "content": text},
	}})
	return b
}

// chatAnswer is a chat answer whose first choice says text.
func chatAnswer(text string) []byte {
	b, _ := json.Marshal(map[string]any{"choices": []any{
		map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}},
	}})
	return b
}

// before builds a before-request input for a chat request.
func before(text string) *guardrails.Input {
	return &guardrails.Input{Stage: guardrails.BeforeRequest, RequestType: "chatComplete", Request: chatReq(text), Model: "gpt-4o"}
}

// after builds an after-request input for a chat answer.
func after(text string) *guardrails.Input {
	return &guardrails.Input{Stage: guardrails.AfterRequest, RequestType: "chatComplete", Request: chatReq("q"),
		Response: chatAnswer(text), StatusCode: 200}
}

// run looks the check up by its module name as the runner does, prepares
// it when it can be, and runs it.
func run(t *testing.T, name string, in *guardrails.Input, params string) (guardrails.Verdict, error) {
	t.Helper()
	info, err := caddy.GetModule(guardrails.Namespace + "." + name)
	if err != nil {
		t.Fatalf("module %s not registered: %v", name, err)
	}
	c := info.New().(guardrails.Check)
	if p, ok := c.(guardrails.Preparer); ok {
		bound, err := p.Prepare(json.RawMessage(params))
		if err != nil {
			return guardrails.Verdict{}, &prepareError{err}
		}
		c = bound
	}
	return c.Check(context.Background(), in, json.RawMessage(params))
}

type prepareError struct{ error }

// checkCase is one table row: the verdict and error expected.
type checkCase struct {
	name    string
	in      *guardrails.Input
	params  string
	pass    bool
	errSub  string // "" = no error
	prepare bool   // the error comes from Prepare (a config error)
}

func runCases(t *testing.T, check string, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := run(t, check, tc.in, tc.params)
			_, isPrep := err.(*prepareError)
			switch {
			case tc.errSub == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.errSub != "" && (err == nil || !strings.Contains(err.Error(), tc.errSub)):
				t.Fatalf("error %v, want one containing %q", err, tc.errSub)
			case tc.errSub != "" && isPrep != tc.prepare:
				t.Fatalf("error %v: from Prepare = %v, want %v", err, isPrep, tc.prepare)
			}
			if !isPrep && v.Pass != tc.pass {
				t.Fatalf("verdict %v, want %v (data %v)", v.Pass, tc.pass, v.Data)
			}
		})
	}
}
