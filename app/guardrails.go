package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
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
	// asyncPool runs async hooks; set between Start and Stop.
	asyncPool *guardrails.AsyncPool
}

// asyncPools holds the process's one async hook pool. Each started llm
// app holds a reference, so the pool survives a reload (the new config
// starts before the old one stops, and the old config's last requests
// still hand their async hooks to it) and stops with the last config.
var asyncPools = caddy.NewUsagePool()

const asyncPoolKey = "async_hooks"

type asyncPool struct{ *guardrails.AsyncPool }

func (p asyncPool) Destruct() error { p.Stop(); return nil }

// startHookPool takes a reference to the async hook pool (creating it),
// and points its drop warnings at this config's logger.
func (a *App) startHookPool() {
	v, _, _ := asyncPools.LoadOrNew(asyncPoolKey, func() (caddy.Destructor, error) {
		return asyncPool{guardrails.NewAsyncPool(guardrails.AsyncWorkers, guardrails.AsyncQueue, guardrails.AsyncQueueBytes, a.logger)}, nil
	})
	a.asyncPool = v.(asyncPool).AsyncPool
	a.asyncPool.SetLogger(a.logger)
}

// stopHookPool releases this config's reference; the last one stops the
// pool (running hooks are cancelled, waiting ones dropped). Requests of
// this config still finishing keep a.asyncPool: while a newer config
// runs, it is the same live pool.
func (a *App) stopHookPool() {
	if a.asyncPool != nil {
		_, _ = asyncPools.Delete(asyncPoolKey)
	}
}

// AsyncHooks returns the pool async hooks run on (nil before Start, which
// Submit treats as a stopped pool).
func (a *App) AsyncHooks() *guardrails.AsyncPool { return a.asyncPool }

// provisionGuardrails registers the guardrail metrics into reg (the
// config's registry; nil skips it) and compiles every saved guardrail, so
// an unknown check, a missing or invalid parameter or a malformed field
// fails the config load naming the guardrail and the field.
func (a *App) provisionGuardrails(reg prometheus.Registerer) error {
	if err := guardrails.RegisterMetrics(reg); err != nil {
		return fmt.Errorf("registering guardrail metrics: %v", err)
	}
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
		// A target's stage runs the hooks of both its fields together, so
		// the check limit applies to their sum.
		var stages [2][]*guardrails.Hook
		for _, f := range hookFields {
			var err error
			n.v.Get(f.name).ForEach(func(i, h gjson.Result) bool {
				var hook *guardrails.Hook
				if hook, err = guardrails.Compile(json.RawMessage(h.Raw), f.name, a.Guardrail); err != nil {
					err = fmt.Errorf("%s.%s[%d]: %v", n.path, f.name, i.Int(), err)
					return false
				}
				stages[f.stage] = append(stages[f.stage], hook)
				return true
			})
			if err != nil {
				return err
			}
		}
		for stage, hooks := range stages {
			if err := guardrails.LimitChecks(guardrails.Stage(stage), hooks); err != nil {
				return fmt.Errorf("%s: %v", n.path, err)
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
