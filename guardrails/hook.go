package guardrails

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Check limits. Every check of a stage holds the stage's input while it
// runs, and remote checks hold an outbound call each, so a config may not
// name them without bound.
const (
	// MaxChecks bounds the checks of one stage of one target: the
	// before-request hooks and input guardrails together (sync and async),
	// or the after-request hooks and output guardrails together. A config
	// naming more is refused: a 400 for a request's config, a load error
	// for a saved config or guardrail.
	MaxChecks = 32
	// MaxConcurrentChecks bounds how many checks of one hook run at once
	// (checks that call out run concurrently unless the hook is
	// sequential).
	MaxConcurrentChecks = 4
)

// LimitChecks refuses one stage's hooks of one target when they hold more
// than MaxChecks checks in all.
func LimitChecks(stage Stage, hooks []*Hook) error {
	n := 0
	for _, h := range hooks {
		n += len(h.Checks)
	}
	if n <= MaxChecks {
		return nil
	}
	where := "before-request hooks and input guardrails"
	if stage == AfterRequest {
		where = "after-request hooks and output guardrails"
	}
	id := ""
	if len(hooks) > 0 {
		id = hooks[len(hooks)-1].ID
	}
	return &CompileError{Hook: id, Msg: fmt.Sprintf("the %s of a target name %d checks; at most %d are allowed", where, n, MaxChecks)}
}

// Hook types.
const (
	TypeGuardrail = "guardrail"
	TypeMutator   = "mutator"
)

// Hook is one compiled hook or guardrail: its checks are resolved to
// modules and their parameters prepared. A Hook is immutable and may be
// shared by concurrent requests.
type Hook struct {
	ID         string
	Type       string
	Async      bool
	Sequential bool
	// Deny is the hook's top-level "deny" (where the reference reads it);
	// OnFail.Deny and OnSuccess.Deny are the spec's places.
	Deny      bool
	OnFail    Outcome
	OnSuccess Outcome
	Checks    []*CheckSpec
	remote    int
}

// Outcome is the hook's on_fail or on_success object.
type Outcome struct {
	Deny     bool
	Feedback *Feedback
}

// Feedback is the config's feedback object.
type Feedback struct {
	Value    *float64       `json:"value,omitempty"`
	Weight   *float64       `json:"weight,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// CheckSpec is one check of a hook.
type CheckSpec struct {
	// ID is the id as written in the config ("default.regexMatch").
	ID          string
	Params      json.RawMessage
	FailOnError bool
	check       Check
	remote      bool
}

// reserved are the keys of a hook object that are not checks in the
// shorthand form (research/portkey.md §7.1), plus "checks" of the full form.
var reserved = map[string]bool{
	"id": true, "type": true, "deny": true, "async": true, "sequential": true,
	"on_fail": true, "on_success": true, "guardrail_version_id": true, "checks": true,
}

// SavedFunc looks up a saved guardrail by id.
type SavedFunc func(id string) (*Hook, bool)

// CompileError says which hook and field of a config cannot be used.
type CompileError struct {
	Hook  string // the hook's id, or its index as "[n]"
	Field string // e.g. `checks[0]` or `["default.regexMatch"].rule`
	Msg   string
}

func (e *CompileError) Error() string {
	s := "guardrail " + strconv.Quote(e.Hook)
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

// Compile parses one hook in any of the accepted forms:
//   - the full form {"id", "type", "checks":[{"id","parameters","is_enabled"}], …};
//   - the guardrail shorthand {"default.regexMatch":{…}, "deny":true, …},
//     where every non-reserved key is a check;
//   - a string naming a saved guardrail, resolved with saved (nil: none).
//
// defaultID names a hook without an id. Unknown checks, unknown saved ids
// and parameters a check's Prepare rejects are errors.
func Compile(raw json.RawMessage, defaultID string, saved SavedFunc) (*Hook, error) {
	if err := jsonlimit.Check(raw); err != nil {
		return nil, &CompileError{Hook: defaultID, Msg: err.Error()}
	}
	r := gjson.ParseBytes(raw)
	if r.Type == gjson.String {
		if saved != nil {
			if h, ok := saved(r.Str); ok {
				return h, nil
			}
		}
		return nil, &CompileError{Hook: r.Str, Msg: "no saved guardrail has this id"}
	}
	if !r.IsObject() {
		return nil, &CompileError{Hook: defaultID, Msg: "must be a JSON object or a saved guardrail id"}
	}
	h := &Hook{ID: defaultID, Type: TypeGuardrail}
	if id := r.Get("id"); id.Type == gjson.String && id.Str != "" {
		h.ID = id.Str
	}
	bad := func(field, format string, args ...any) error {
		return &CompileError{Hook: h.ID, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if t := r.Get("type"); t.Exists() {
		if t.Str != TypeGuardrail && t.Str != TypeMutator {
			return nil, bad("type", "must be %q or %q", TypeGuardrail, TypeMutator)
		}
		h.Type = t.Str
	}
	var err error
	if h.Deny, err = boolField(r, "deny"); err != nil {
		return nil, bad("deny", "%v", err)
	}
	if h.Async, err = boolField(r, "async"); err != nil {
		return nil, bad("async", "%v", err)
	}
	if h.Sequential, err = boolField(r, "sequential"); err != nil {
		return nil, bad("sequential", "%v", err)
	}
	if h.OnFail, err = outcome(r.Get("on_fail")); err != nil {
		return nil, bad("on_fail", "%v", err)
	}
	if h.OnSuccess, err = outcome(r.Get("on_success")); err != nil {
		return nil, bad("on_success", "%v", err)
	}
	var cerr error
	if checks := r.Get("checks"); checks.Exists() {
		if !checks.IsArray() {
			return nil, bad("checks", "must be an array")
		}
		checks.ForEach(func(k, c gjson.Result) bool {
			field := "checks[" + k.String() + "]"
			if !c.IsObject() {
				cerr = bad(field, "must be an object")
				return false
			}
			if en := c.Get("is_enabled"); en.Type == gjson.False {
				return true
			}
			id := c.Get("id")
			if id.Type != gjson.String || id.Str == "" {
				cerr = bad(field+".id", "must be a non-empty string")
				return false
			}
			params := c.Get("parameters")
			if params.Exists() && !params.IsObject() {
				cerr = bad(field+".parameters", "must be an object")
				return false
			}
			cerr = h.addCheck(id.Str, params.Raw, field)
			return cerr == nil
		})
	}
	if cerr != nil {
		return nil, cerr
	}
	r.ForEach(func(k, v gjson.Result) bool {
		if reserved[k.Str] {
			return true
		}
		field := "[" + strconv.Quote(k.Str) + "]"
		if !v.IsObject() {
			cerr = bad(field, "must be an object of check parameters")
			return false
		}
		id := k.Str
		if !strings.Contains(id, ".") {
			id = "default." + id
		}
		cerr = h.addCheck(id, v.Raw, field)
		return cerr == nil
	})
	if cerr != nil {
		return nil, cerr
	}
	if err := LimitChecks(BeforeRequest, []*Hook{h}); err != nil {
		return nil, &CompileError{Hook: h.ID, Msg: fmt.Sprintf("names %d checks; at most %d are allowed", len(h.Checks), MaxChecks)}
	}
	return h, nil
}

func (h *Hook) addCheck(id, params, field string) error {
	if params == "" {
		params = "{}"
	}
	c, ok := lookupCheck(id)
	if !ok {
		return &CompileError{Hook: h.ID, Field: field, Msg: fmt.Sprintf("unknown check %q (no module %s.%s is installed)", id, Namespace, strings.TrimPrefix(id, "default."))}
	}
	spec := &CheckSpec{ID: id, Params: json.RawMessage(params), check: c}
	if f := gjson.Get(params, "failOnError"); f.Type == gjson.True {
		spec.FailOnError = true
	}
	if v, ok := c.(Validator); ok {
		if err := v.Validate(spec.Params); err != nil {
			return &CompileError{Hook: h.ID, Field: field, Msg: fmt.Sprintf("check %q: %v", id, err)}
		}
	}
	if p, ok := c.(Preparer); ok {
		bound, err := p.Prepare(spec.Params)
		if err != nil {
			return &CompileError{Hook: h.ID, Field: field, Msg: fmt.Sprintf("check %q: %v", id, err)}
		}
		spec.check = bound
	}
	if rc, ok := c.(Remote); ok && rc.Remote() {
		spec.remote = true
		h.remote++
	}
	h.Checks = append(h.Checks, spec)
	return nil
}

func boolField(r gjson.Result, key string) (bool, error) {
	v := r.Get(key)
	switch v.Type {
	case gjson.True:
		return true, nil
	case gjson.False, gjson.Null:
		return false, nil
	}
	return false, fmt.Errorf("must be a boolean")
}

func outcome(r gjson.Result) (Outcome, error) {
	var o Outcome
	if !r.Exists() || r.Type == gjson.Null {
		return o, nil
	}
	if !r.IsObject() {
		return o, fmt.Errorf("must be an object")
	}
	var err error
	if o.Deny, err = boolField(r, "deny"); err != nil {
		return o, fmt.Errorf("deny: %v", err)
	}
	if fb := r.Get("feedback"); fb.Exists() && fb.Type != gjson.Null {
		if !fb.IsObject() {
			return o, fmt.Errorf("feedback: must be an object")
		}
		o.Feedback = new(Feedback)
		if err := json.Unmarshal([]byte(fb.Raw), o.Feedback); err != nil {
			return o, fmt.Errorf("feedback: %v", err)
		}
	}
	return o, nil
}

// generatedID names a shorthand hook without an id, stably for the same
// JSON, as the reference's input_guardrail_xxx / output_guardrail_xxx.
func generatedID(stage Stage, raw []byte) string {
	h := fnv.New32a()
	_, _ = h.Write(raw)
	prefix := "input_guardrail_"
	if stage == AfterRequest {
		prefix = "output_guardrail_"
	}
	return prefix + strconv.FormatUint(uint64(h.Sum32()), 36)
}
