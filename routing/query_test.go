package routing

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestMatchQuery(t *testing.T) {
	req := &Request{
		Metadata:    map[string]string{"plan": "pro", "tier": "3", "user": `{"org":{"id":"acme"},"beta":true}`},
		MetadataRaw: `{"plan":"pro","tier":3,"user":{"org":{"id":"acme"},"beta":true}}`,
		Params:      []byte(`{"model":"gpt-4o","temperature":0.2,"max_tokens":512,"messages":[{"role":"system","content":"x"}],"tools":[{"type":"function"}]}`),
		Path:        "/v1/chat/completions",
	}
	tests := []struct {
		query string
		want  bool
	}{
		{`{"metadata.plan":"pro"}`, true},
		{`{"metadata.plan":"free"}`, false},
		{`{"metadata.missing":"x"}`, false},
		{`{"metadata.tier":3}`, true}, // numeric string equals number
		{`{"metadata.user.org.id":"acme"}`, true},
		{`{"metadata.user.beta":true}`, true},
		{`{"params.model":"gpt-4o"}`, true},
		{`{"params.messages.0.role":"system"}`, true},
		{`{"params.tools.0.type":{"$eq":"function"}}`, true},
		{`{"url.pathname":"/v1/chat/completions"}`, true},
		{`{"url.pathname":{"$regex":"/embeddings$"}}`, false},
		{`{"metadata.plan":{"$eq":"pro"}}`, true},
		{`{"metadata.plan":{"$ne":"pro"}}`, false},
		{`{"metadata.missing":{"$ne":"pro"}}`, true},
		{`{"params.temperature":{"$gt":0.1}}`, true},
		{`{"params.temperature":{"$gt":0.2}}`, false},
		{`{"params.temperature":{"$gte":0.2}}`, true},
		{`{"params.max_tokens":{"$lt":512}}`, false},
		{`{"params.max_tokens":{"$lte":512}}`, true},
		{`{"metadata.tier":{"$gt":"2"}}`, true},
		{`{"params.max_tokens":{"$gt":"abc"}}`, false},
		{`{"params.missing":{"$lt":5}}`, false},
		{`{"params.max_tokens":{"$gt":100,"$lt":1000}}`, true},
		{`{"params.max_tokens":{"$gt":100,"$lt":200}}`, false},
		{`{"params.model":{"$in":["gpt-4o","gpt-4o-mini"]}}`, true},
		{`{"params.model":{"$in":["claude"]}}`, false},
		{`{"params.model":{"$nin":["claude"]}}`, true},
		{`{"params.model":{"$nin":["gpt-4o"]}}`, false},
		{`{"params.missing":{"$nin":["x"]}}`, true},
		{`{"params.model":{"$regex":"^gpt-4"}}`, true},
		{`{"params.model":{"$regex":"^claude"}}`, false},
		{`{"$and":[{"metadata.plan":"pro"},{"params.model":"gpt-4o"}]}`, true},
		{`{"$and":[{"metadata.plan":"pro"},{"params.model":"x"}]}`, false},
		{`{"$or":[{"metadata.plan":"free"},{"params.model":"gpt-4o"}]}`, true},
		{`{"$or":[{"metadata.plan":"free"},{"params.model":"x"}]}`, false},
		{`{"$or":[{"$and":[{"metadata.plan":"pro"},{"metadata.tier":{"$gte":3}}]},{"metadata.plan":"enterprise"}]}`, true},
		{`{"metadata.plan":"pro","params.model":"x"}`, false}, // keys are ANDed
		{`{"metadata.plan":"pro","$or":[{"params.model":"gpt-4o"}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			var q map[string]any
			if err := json.Unmarshal([]byte(tt.query), &q); err != nil {
				t.Fatal(err)
			}
			if err := validateQuery(q); err != nil {
				t.Fatalf("valid query rejected: %v", err)
			}
			got, err := matchQuery(q, req)
			if err != nil || got != tt.want {
				t.Fatalf("got %v %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestConditionalConfigErrors(t *testing.T) {
	targets := `"targets":[{"provider":"openai","api_key":"a","name":"a"},{"provider":"groq","api_key":"b","name":"b"}]`
	tests := []struct {
		name     string
		strategy string
		param    string
		msg      string
	}{
		{"unknown operator", `{"mode":"conditional","conditions":[{"query":{"metadata.x":{"$like":"y"}},"then":"a"}],"default":"b"}`,
			"config.strategy.conditions[0].query", `unsupported operator "$like"`},
		{"unknown top-level operator", `{"mode":"conditional","conditions":[{"query":{"$not":{}},"then":"a"}],"default":"b"}`,
			"config.strategy.conditions[0].query", `unsupported operator "$not"`},
		{"nested bad operator", `{"mode":"conditional","conditions":[{"query":{"metadata.x":"y"},"then":"a"},{"query":{"$or":[{"params.m":{"$exists":true}}]},"then":"b"}],"default":"b"}`,
			"config.strategy.conditions[1].query", `$or[0]: params.m: unsupported operator "$exists"`},
		{"unknown field", `{"mode":"conditional","conditions":[{"query":{"headers.x":"y"},"then":"a"}],"default":"b"}`,
			"config.strategy.conditions[0].query", `unknown field "headers.x"`},
		{"$in needs an array", `{"mode":"conditional","conditions":[{"query":{"metadata.x":{"$in":"y"}},"then":"a"}],"default":"b"}`,
			"config.strategy.conditions[0].query", "$in needs an array"},
		{"bad regex", `{"mode":"conditional","conditions":[{"query":{"metadata.x":{"$regex":"("}},"then":"a"}],"default":"b"}`,
			"config.strategy.conditions[0].query", "$regex"},
		{"then names no target", `{"mode":"conditional","conditions":[{"query":{"metadata.x":"y"},"then":"c"}],"default":"b"}`,
			"config.strategy.conditions[0].then", `names target "c"`},
		{"default names no target", `{"mode":"conditional","conditions":[{"query":{"metadata.x":"y"},"then":"a"}],"default":"zz"}`,
			"config.strategy.default", `names target "zz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveHeaders(t, "x-gateway-config", `{"strategy":`+tt.strategy+`,`+targets+`}`)
			e, ok := err.(*apierror.Error)
			if !ok || e.Status != 400 || e.Param != tt.param || !strings.Contains(e.Message, tt.msg) {
				t.Fatalf("want a 400 at %s saying %q, got %v", tt.param, tt.msg, err)
			}
		})
	}
}

func TestConditionalNestedNames(t *testing.T) {
	// Names are looked up among the conditional node's own children, at
	// any depth of the tree.
	cfg := `{"strategy":{"mode":"fallback"},"targets":[
		{"strategy":{"mode":"conditional","conditions":[{"query":{"params.model":{"$regex":"^gpt"}},"then":"oa"}],"default":"gq"},
		 "targets":[{"provider":"openai","api_key":"a","name":"oa"},{"provider":"groq","api_key":"b","name":"gq"}]},
		{"provider":"openai","api_key":"c"}]}`
	p := mustPlan(t, cfg)
	s := newScript(nil)
	res, err := testRouter(newFakeClock(), 0).Run(t.Context(), p, &Request{Params: []byte(`{"model":"gpt-4o"}`)}, s)
	if err != nil || res.Target.Path != "config.targets[0].targets[0]" {
		t.Fatalf("routed to %v (%v)", res.Target, err)
	}
}
