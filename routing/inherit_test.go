package routing

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInheritanceTable checks each row of the reference gateway's
// parent→child inheritance (research/portkey.md §2.2) on a three-level
// tree: root → middle node → leaves.
func TestInheritanceTable(t *testing.T) {
	cfg := `{
		"retry":{"attempts":3},"cache":{"mode":"simple","max_age":60},
		"cb_config":{"failure_threshold":2,"cooldown_interval":30000},
		"request_timeout":900,"strict_open_ai_compliance":false,
		"forward_headers":["X-Root"],"custom_host":"http://root",
		"override_params":{"temperature":0.1,"model":"root","top_p":0.5},
		"before_request_hooks":[{"id":"root-before"}],"after_request_hooks":[{"id":"root-after"}],
		"weight":7,"strategy":{"mode":"fallback"},
		"targets":[
			{"strategy":{"mode":"fallback"},"override_params":{"model":"mid"},"retry":{"attempts":1,"on_status_codes":[418]},
			 "input_guardrails":[{"id":"mid-guard"}],
			 "targets":[
				{"provider":"openai","api_key":"leaf0","override_params":{"max_tokens":5}},
				{"provider":"groq","api_key":"leaf1","cache":{"mode":"semantic"},"request_timeout":100,"strict_open_ai_compliance":true,
				 "forward_headers":["X-Leaf"],"custom_host":"http://leaf","cb_config":{"failure_threshold":9,"cooldown_interval":60000},
				 "override_params":{"temperature":0.9},"after_request_hooks":[{"id":"leaf-after"}],"weight":2}
			 ]},
			{"provider":"openai","api_key":"leaf2"}
		]}`
	p := mustPlan(t, cfg)
	if len(p.Leaves) != 3 {
		t.Fatalf("%d leaves", len(p.Leaves))
	}
	l0, l1, l2 := p.Leaves[0], p.Leaves[1], p.Leaves[2]
	raw := func(m map[string]json.RawMessage) string {
		b, _ := json.Marshal(m)
		return string(b)
	}
	hooks := func(h []json.RawMessage) string {
		var ids []string
		for _, r := range h {
			var v struct{ ID string }
			_ = json.Unmarshal(r, &v)
			ids = append(ids, v.ID)
		}
		return strings.Join(ids, ",")
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"paths", l0.Path + " " + l1.Path + " " + l2.Path, "config.targets[0].targets[0] config.targets[0].targets[1] config.targets[1]"},
		// override_params merge shallowly, child keys winning at each level.
		{"override_params leaf0", raw(l0.OverrideParams), `{"max_tokens":5,"model":"mid","temperature":0.1,"top_p":0.5}`},
		{"override_params leaf1", raw(l1.OverrideParams), `{"model":"mid","temperature":0.9,"top_p":0.5}`},
		{"override_params leaf2", raw(l2.OverrideParams), `{"model":"root","temperature":0.1,"top_p":0.5}`},
		// retry and cache: the child's object replaces the parent's whole.
		{"retry replaced whole", l0.Retry.Attempts == 1 && len(l0.Retry.OnStatusCodes) == 1, true},
		{"retry inherited", l2.Retry.Attempts == 3 && len(l2.Retry.OnStatusCodes) == 0, true},
		{"cache inherited", l0.Cache.Mode + " " + l2.Cache.Mode, "simple simple"},
		{"cache replaced whole", l1.Cache.Mode + " " + boolStr(l1.Cache.MaxAge == nil), "semantic true"},
		{"cb_config inherited", l0.CB.FailureThreshold, 2.0},
		{"cb_config replaced", l1.CB.FailureThreshold, 9.0},
		{"request_timeout", []int64{l0.RequestTimeoutMS, l1.RequestTimeoutMS, l2.RequestTimeoutMS}, []int64{900, 100, 900}},
		{"strict", []bool{*l0.StrictOpenAICompliance, *l1.StrictOpenAICompliance}, []bool{false, true}},
		{"forward_headers", strings.Join(l0.ForwardHeaders, ",") + " " + strings.Join(l1.ForwardHeaders, ","), "X-Root X-Leaf"},
		{"custom_host", l0.Settings.CustomHost + " " + l1.Settings.CustomHost, "http://root http://leaf"},
		// hooks: a level's own hooks plus its guardrails replace the parent's.
		{"before hooks replaced by the middle's guardrails", hooks(l0.BeforeRequestHooks), "mid-guard"},
		{"after hooks inherited", hooks(l0.AfterRequestHooks), "root-after"},
		{"after hooks replaced", hooks(l1.AfterRequestHooks), "leaf-after"},
		{"before hooks at the root", hooks(l2.BeforeRequestHooks), "root-before"},
		// provider, api_key and weight are never inherited.
		{"credentials not inherited", l0.Settings.APIKey + " " + l1.Settings.APIKey + " " + l2.Settings.APIKey, "leaf0 leaf1 leaf2"},
		{"weight default 1, not inherited", []float64{p.Root.Children[0].Weight, p.Root.Children[0].Children[1].Weight}, []float64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := json.Marshal(tt.got)
			w, _ := json.Marshal(tt.want)
			if string(g) != string(w) {
				t.Fatalf("got %s, want %s", g, w)
			}
		})
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestHeadersRefineEveryLeaf(t *testing.T) {
	p := mustPlan(t, twoTargets(`{"mode":"fallback"}`,
		`{"provider":"openai","api_key":"a","request_timeout":5000}`, `{"provider":"openai","api_key":"b","custom_host":"http://own"}`),
		"x-gateway-request-timeout", "250", "x-gateway-custom-host", "http://header")
	a, b := p.Leaves[0], p.Leaves[1]
	if a.RequestTimeoutMS != 250 || b.RequestTimeoutMS != 250 {
		t.Fatalf("the timeout header must win over the config: %d %d", a.RequestTimeoutMS, b.RequestTimeoutMS)
	}
	if a.Settings.CustomHost != "http://header" || b.Settings.CustomHost != "http://own" {
		t.Fatalf("the custom host header fills only leaves without one: %q %q", a.Settings.CustomHost, b.Settings.CustomHost)
	}
}

func TestIdentity(t *testing.T) {
	p := mustPlan(t, `{"strategy":{"mode":"fallback"},"targets":[
		{"provider":"openai","api_key":"sk-aaaa"},
		{"provider":"openai","api_key":"sk-bbbb"},
		{"provider":"openai","api_key":"sk-aaaa","custom_host":"HTTP://Host:8080/"},
		{"provider":"openai","api_key":"sk-aaaa"}]}`)
	ids := make([]string, len(p.Leaves))
	for i, l := range p.Leaves {
		ids[i] = l.Identity()
		if strings.Contains(ids[i], "sk-") {
			t.Fatalf("identity holds the key: %s", ids[i])
		}
	}
	if ids[0] == ids[1] || ids[0] == ids[2] || ids[0] != ids[3] {
		t.Fatalf("identities %v: want 0 and 3 equal, the others distinct", ids)
	}
	if !strings.HasPrefix(ids[2], "openai|http://host:8080|") || !strings.HasPrefix(ids[0], "openai|default|") {
		t.Fatalf("identities %v", ids)
	}
}
