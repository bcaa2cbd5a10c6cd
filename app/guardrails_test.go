package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProvisionGuardrails(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pii.json")
	if err := os.WriteFile(file, []byte(`  {"type":"guardrail","deny":true,"checks":[{"id":"default.regexMatch","parameters":{"rule":"\\d{16}","not":true}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pathJSON, _ := json.Marshal(file)
	tests := []struct {
		name    string
		defs    map[string]string
		wantErr []string // substrings; nil = success
	}{
		{name: "inline shorthand and file", defs: map[string]string{
			"short": `{"default.wordCount":{"minWords":1,"maxWords":10},"on_fail":{"deny":true}}`,
			"pii":   string(pathJSON),
		}},
		{name: "regex RE2 cannot compile", defs: map[string]string{"g1": `{"default.regexMatch":{"rule":"a(?=b)"}}`},
			wantErr: []string{`guardrail "g1"`, `["default.regexMatch"]`, "RE2"}},
		{name: "unknown check", defs: map[string]string{"g2": `{"checks":[{"id":"acme.pii","parameters":{}}]}`},
			wantErr: []string{`guardrail "g2"`, "checks[0]", `unknown check "acme.pii"`}},
		{name: "bad field type", defs: map[string]string{"g3": `{"deny":"yes","default.contains":{"words":["x"]}}`},
			wantErr: []string{`guardrail "g3"`, "deny", "boolean"}},
		{name: "bad schema", defs: map[string]string{"g4": `{"default.jsonSchema":{"schema":{"type":5}}}`},
			wantErr: []string{`guardrail "g4"`, `["default.jsonSchema"]`, "schema"}},
		{name: "not an object", defs: map[string]string{"g5": `[1]`},
			wantErr: []string{`guardrail "g5"`, "JSON object"}},
		{name: "missing file", defs: map[string]string{"g6": `"/nonexistent/guardrail.json"`},
			wantErr: []string{`guardrail "g6"`, "reading"}},
		{name: "missing required parameter", defs: map[string]string{"g8": `{"default.wordCount":{"minWords":1},"deny":true}`},
			wantErr: []string{`guardrail "g8"`, `["default.wordCount"]`, `missing required parameter "maxWords"`}},
		{name: "too many checks", defs: map[string]string{"g9": `{"checks":[` + strings.Repeat(`{"id":"default.notNull"},`, 32) + `{"id":"default.notNull"}]}`},
			wantErr: []string{`guardrail "g9"`, "33 checks", "at most 32"}},
		{name: "string referring to another guardrail", defs: map[string]string{"g7": `"{\"x\":1}"`},
			wantErr: []string{`guardrail "g7"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := new(App)
			a.Guardrails = map[string]json.RawMessage{}
			for id, d := range tc.defs {
				a.Guardrails[id] = json.RawMessage(d)
			}
			err := a.provisionGuardrails(nil)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				for id := range tc.defs {
					h, ok := a.Guardrail(id)
					if !ok || h.ID != id || len(h.Checks) != 1 {
						t.Fatalf("Guardrail(%q) = %v, %v", id, h, ok)
					}
				}
				if h, _ := a.Guardrail("pii"); !h.Deny {
					t.Fatal("file definition not read")
				}
				if _, ok := a.Guardrail("nope"); ok {
					t.Fatal("unknown id found")
				}
				return
			}
			if err == nil {
				t.Fatal("want a load error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestGuardrailsJSONField pins the app's JSON field name.
func TestGuardrailsJSONField(t *testing.T) {
	var a App
	if err := json.Unmarshal([]byte(`{"guardrails":{"g":{"default.contains":{"words":["x"],"operator":"any"}}}}`), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Guardrails) != 1 {
		t.Fatalf("guardrails not decoded: %v", a.Guardrails)
	}
	b, _ := json.Marshal(a)
	if !strings.Contains(string(b), `"guardrails":{"g":`) {
		t.Fatalf("encoded %s", b)
	}
}

func TestCheckConfigHooks(t *testing.T) {
	a := new(App)
	a.Guardrails = map[string]json.RawMessage{"pii": json.RawMessage(`{"default.regexMatch":{"rule":"\\d{16}","not":true}}`)}
	if err := a.provisionGuardrails(nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cfg string
		wantErr   []string
	}{
		{"valid with saved id", `{"input_guardrails":["pii"],"targets":[{"provider":"openai","output_guardrails":[{"default.contains":{"words":["x"],"operator":"any"}}]}]}`, nil},
		{"unknown saved id", `{"provider":"openai","input_guardrails":["nope"]}`,
			[]string{"config.input_guardrails[0]", `guardrail "nope"`, "no saved guardrail"}},
		{"bad regex in a nested target", `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai"},{"provider":"openai","before_request_hooks":[{"id":"h","checks":[{"id":"default.regexMatch","parameters":{"rule":"(?!x)"}}]}]}]}`,
			[]string{"config.targets[1].before_request_hooks[0]", `guardrail "h"`, "RE2"}},
		{"unknown check", `{"provider":"openai","after_request_hooks":[{"id":"h","checks":[{"id":"acme.x","parameters":{}}]}]}`,
			[]string{"config.after_request_hooks[0]", `unknown check "acme.x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := a.checkConfigHooks([]byte(tc.cfg))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestHookPoolOutlivesReload: the async hook pool is shared by the
// started llm apps; a reload (the new app starts, then the old one
// stops) keeps it running for both configs' requests, and the last stop
// stops it.
func TestHookPoolOutlivesReload(t *testing.T) {
	old, next := new(App), new(App)
	old.startHookPool()
	next.startHookPool()
	if old.AsyncHooks() != next.AsyncHooks() || old.AsyncHooks() == nil {
		t.Fatal("the two configs must share one pool")
	}
	old.stopHookPool()
	done := make(chan struct{})
	if !old.AsyncHooks().Submit(1, func(context.Context) { close(done) }) {
		t.Fatal("the old config's last requests must still reach the pool after a reload")
	}
	<-done
	next.stopHookPool()
	if next.AsyncHooks().Submit(1, func(context.Context) {}) {
		t.Fatal("the pool must stop with the last config")
	}
}
