package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	// The default checks must be registered before saved guardrails compile.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails/checks"
)

// guardrailStore holds saved guardrails. It is embedded in App so the
// JSON field "guardrails" appears at the app's top level.
type guardrailStore struct {
	// Guardrails map a saved guardrail id to its definition, inline as a
	// JSON object or as a JSON string holding a file path. A definition is
	// a hook in the full form ({"type","checks":[…],"deny",…}) or the
	// guardrail shorthand ({"default.regexMatch":{…},"deny":true,…}). The
	// string form of input_guardrails / output_guardrails names these ids.
	Guardrails map[string]json.RawMessage `json:"guardrails,omitempty"`

	compiled map[string]*guardrails.Hook
}

// provisionGuardrails compiles every saved guardrail, so an unknown check,
// a regex RE2 cannot compile or a malformed field fails the config load
// naming the guardrail and the field.
func (a *App) provisionGuardrails() error {
	a.compiled = make(map[string]*guardrails.Hook, len(a.Guardrails))
	ids := make([]string, 0, len(a.Guardrails))
	for id := range a.Guardrails {
		ids = append(ids, id)
	}
	sort.Strings(ids) // report the same error on every load
	for _, id := range ids {
		if id == "" {
			return fmt.Errorf("guardrails: an id is empty")
		}
		body, err := loadConfig(a.Guardrails[id])
		if err != nil {
			return fmt.Errorf("guardrail %q: %v", id, err)
		}
		if body = bytes.TrimSpace(body); len(body) == 0 || body[0] != '{' {
			return fmt.Errorf("guardrail %q: definition must be a JSON object", id)
		}
		h, err := guardrails.Compile(body, id, nil)
		if err != nil {
			var ce *guardrails.CompileError
			if errors.As(err, &ce) {
				if ce.Field != "" {
					return fmt.Errorf("guardrail %q: %s: %s", id, ce.Field, ce.Msg)
				}
				return fmt.Errorf("guardrail %q: %s", id, ce.Msg)
			}
			return fmt.Errorf("guardrail %q: %v", id, err)
		}
		// The saved id is the name results and logs report.
		h.ID = id
		a.compiled[id] = h
	}
	return nil
}

// hookFields are the config fields holding hooks, with their stage.
var hookFields = []struct {
	name  string
	stage guardrails.Stage
}{
	{"before_request_hooks", guardrails.BeforeRequest},
	{"input_guardrails", guardrails.BeforeRequest},
	{"after_request_hooks", guardrails.AfterRequest},
	{"output_guardrails", guardrails.AfterRequest},
}

// checkConfigHooks compiles every hook of a saved config (at every level
// of targets), so an unknown check, an unknown saved guardrail id or a
// regex RE2 cannot compile fails the load instead of every request.
func (a *App) checkConfigHooks(body []byte) error {
	if err := jsonlimit.Check(body); err != nil {
		return err
	}
	// Walk the targets tree iteratively; paths name the failing field.
	type node struct {
		path string
		v    gjson.Result
	}
	stack := []node{{"config", gjson.ParseBytes(body)}}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, f := range hookFields {
			var err error
			n.v.Get(f.name).ForEach(func(i, h gjson.Result) bool {
				if _, err = guardrails.Compile(json.RawMessage(h.Raw), f.name, a.Guardrail); err != nil {
					err = fmt.Errorf("%s.%s[%d]: %v", n.path, f.name, i.Int(), err)
					return false
				}
				return true
			})
			if err != nil {
				return err
			}
		}
		n.v.Get("targets").ForEach(func(i, t gjson.Result) bool {
			stack = append(stack, node{fmt.Sprintf("%s.targets[%d]", n.path, i.Int()), t})
			return true
		})
	}
	return nil
}

// Guardrail returns the compiled saved guardrail id. It has the shape of
// guardrails.SavedFunc: set Runner.Saved = app.Guardrail.
func (a *App) Guardrail(id string) (*guardrails.Hook, bool) {
	h, ok := a.compiled[id]
	return h, ok
}
