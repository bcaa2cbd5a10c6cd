package routing

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

var (
	contextTooLong = Outcome{Status: 400, ErrorType: providers.ErrContextLength}
	rateLimited    = Outcome{Status: 429, ErrorType: providers.ErrRateLimited}
)

// TestFallbackOnErrorTypes: on_error_types moves on from a listed class
// only, alone or beside on_status_codes (either list suffices).
func TestFallbackOnErrorTypes(t *testing.T) {
	tests := []struct {
		name     string
		strategy string
		first    Outcome
		status   int
		steps    string
	}{
		{"a listed class moves on", `{"mode":"fallback","on_error_types":["context_length_exceeded"]}`,
			contextTooLong, 200, t0 + ":fallback " + t1 + ":ok"},
		{"an unlisted class is the answer", `{"mode":"fallback","on_error_types":["context_length_exceeded"]}`,
			rateLimited, 429, t0 + ":error"},
		{"an answer of no class is the answer", `{"mode":"fallback","on_error_types":["overloaded"]}`,
			fail500, 500, t0 + ":error"},
		{"a listed status beside the types", `{"mode":"fallback","on_status_codes":[429],"on_error_types":["context_length_exceeded"]}`,
			rateLimited, 200, t0 + ":fallback " + t1 + ":ok"},
		{"a listed type beside the statuses", `{"mode":"fallback","on_status_codes":[500],"on_error_types":["context_length_exceeded"]}`,
			contextTooLong, 200, t0 + ":fallback " + t1 + ":ok"},
		{"the types narrow a fallback without statuses", `{"mode":"fallback","on_error_types":["rate_limited"]}`,
			fail400, 400, t0 + ":error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, twoTargets(tt.strategy))
			s := newScript(map[string][]Outcome{t0: {tt.first}})
			res, err := testRouter(newFakeClock(), 0).Run(context.Background(), p, &Request{}, s)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || stepSummary(res.Steps) != tt.steps {
				t.Fatalf("got %d [%s], want %d [%s]", res.Status, stepSummary(res.Steps), tt.status, tt.steps)
			}
		})
	}
}

// TestOnErrorTypesRefused: an unknown type is a 400 that lists the known
// ones, and the field belongs to fallback strategies only.
func TestOnErrorTypesRefused(t *testing.T) {
	tests := []struct {
		name, strategy, param string
		msg                   []string
	}{
		{"unknown type", `{"mode":"fallback","on_error_types":["context_too_long"]}`, "config.strategy.on_error_types[0]",
			[]string{`must be one of "context_length_exceeded", "content_policy", "rate_limited", "quota_exhausted", "overloaded", "invalid_request" but found "context_too_long"`}},
		{"not a list", `{"mode":"fallback","on_error_types":"rate_limited"}`, "config.strategy.on_error_types",
			[]string{"must be an array"}},
		{"not a fallback", `{"mode":"loadbalance","on_error_types":["rate_limited"]}`, "config.strategy.on_error_types",
			[]string{`only a fallback strategy falls back on error types, and this one's mode is "loadbalance"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveHeaders(t, "x-gateway-config", twoTargets(tt.strategy))
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tt.param {
				t.Fatalf("want a 400 at %s, got %v", tt.param, err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(ae.Message, m) {
					t.Errorf("message %q lacks %q", ae.Message, m)
				}
			}
		})
	}
}

// TestErrorTypesEnumIsTheClasses: the schema's enum and the classes the
// providers report are one list.
func TestErrorTypesEnumIsTheClasses(t *testing.T) {
	var doc struct {
		Defs struct {
			Strategy struct {
				Properties struct {
					OnErrorTypes struct {
						Items struct {
							Enum []providers.ErrorClass `json:"enum"`
						} `json:"items"`
					} `json:"on_error_types"`
				} `json:"properties"`
			} `json:"strategy"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(configSchemaJSON, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Defs.Strategy.Properties.OnErrorTypes.Items.Enum; !slices.Equal(got, providers.ErrorClasses) {
		t.Fatalf("schema enum %v, classes %v", got, providers.ErrorClasses)
	}
}
