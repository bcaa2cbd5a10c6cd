package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// requestModel is the model of the request body, as the reference reads
// it, falling back to the model the gateway resolved.
func requestModel(in *guardrails.Input) string {
	if m := gjson.GetBytes(in.Request, "model"); m.Type == gjson.String && m.Str != "" {
		return m.Str
	}
	return in.Model
}

// ModelWhitelist (llm.checks.modelWhitelist; the reference's manifest id
// "modelwhitelist" also works) passes when the request's model is in
// "models"; "not" inverts.
type ModelWhitelist struct{}

// CaddyModule implements caddy.Module.
func (ModelWhitelist) CaddyModule() caddy.ModuleInfo {
	return info("modelWhitelist", func() caddy.Module { return new(ModelWhitelist) })
}

// Check implements guardrails.Check.
func (ModelWhitelist) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	models, ok := stringList(gjson.GetBytes(params, "models"), false)
	if !ok {
		return guardrails.Verdict{}, errors.New("missing model list")
	}
	model := requestModel(in)
	if model == "" {
		return guardrails.Verdict{}, errors.New("missing model in request")
	}
	not := truthy(params, "not")
	verdict := invert(slices.Contains(models, model), not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"verdict": verdict, "not": not, "requestedModel": model,
		"explanation": fmt.Sprintf("Model %q is %sin the allowed list.", model, map[bool]string{true: "", false: "not "}[slices.Contains(models, model)]),
	}}, nil
}

// ModelRules (llm.checks.modelRules) allows models by request metadata:
// "rules" is {"defaults":[models], "metadata":{<key>:{<value>:[models]}}}.
// The allowed models are the union for every metadata value the request
// carries (a JSON array value counts each element), or the defaults when
// none matched. "not" inverts.
type ModelRules struct{}

// CaddyModule implements caddy.Module.
func (ModelRules) CaddyModule() caddy.ModuleInfo {
	return info("modelRules", func() caddy.Module { return new(ModelRules) })
}

// Check implements guardrails.Check.
func (ModelRules) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	rules := gjson.GetBytes(params, "rules")
	if !rules.IsObject() {
		return guardrails.Verdict{}, errors.New("missing rules")
	}
	model := requestModel(in)
	if model == "" {
		return guardrails.Verdict{}, errors.New("missing model in request")
	}
	var allowed []string
	add := func(list gjson.Result) {
		l, _ := stringList(list, false)
		for _, m := range l {
			if !slices.Contains(allowed, m) {
				allowed = append(allowed, m)
			}
		}
	}
	rules.Get("metadata").ForEach(func(key, byValue gjson.Result) bool {
		v, ok := in.Metadata[key.Str]
		if !ok {
			return true
		}
		values := []string{v}
		if arr := gjson.Parse(v); len(v) > 0 && v[0] == '[' && arr.IsArray() {
			values = values[:0]
			arr.ForEach(func(_, e gjson.Result) bool {
				values = append(values, e.String())
				return true
			})
		}
		for _, val := range values {
			add(byValue.Get(gjson.Escape(val)))
		}
		return true
	})
	if len(allowed) == 0 {
		add(rules.Get("defaults"))
	}
	if len(allowed) == 0 {
		return guardrails.Verdict{}, errors.New("no allowed models resolved from rules")
	}
	not := truthy(params, "not")
	verdict := invert(slices.Contains(allowed, model), not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"verdict": verdict, "not": not, "requestedModel": model, "allowedModels": allowed,
	}}, nil
}

// RequiredMetadataKeys (llm.checks.requiredMetadataKeys) requires request
// metadata keys: "metadataKeys" (non-empty string array) with "operator"
// all, any or none. Bad parameters, or use after the request, report an
// error but pass, as in the reference.
type RequiredMetadataKeys struct{}

// CaddyModule implements caddy.Module.
func (RequiredMetadataKeys) CaddyModule() caddy.ModuleInfo {
	return info("requiredMetadataKeys", func() caddy.Module { return new(RequiredMetadataKeys) })
}

// Check implements guardrails.Check.
func (RequiredMetadataKeys) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	pass := guardrails.Verdict{Pass: true}
	if in.Stage != guardrails.BeforeRequest {
		return pass, errors.New("requiredMetadataKeys only runs before the request")
	}
	keys, ok := stringList(gjson.GetBytes(params, "metadataKeys"), false)
	if !ok || len(keys) == 0 {
		return pass, errors.New("metadataKeys: must be a non-empty array of strings")
	}
	op := gjson.GetBytes(params, "operator").Str
	if op != "all" && op != "any" && op != "none" {
		return pass, errors.New(`operator: must be "all", "any" or "none"`)
	}
	var found, missing []string
	for _, k := range keys {
		if _, ok := in.Metadata[k]; ok {
			found = append(found, k)
		} else {
			missing = append(missing, k)
		}
	}
	var verdict bool
	switch op {
	case "all":
		verdict = len(missing) == 0
	case "any":
		verdict = len(found) > 0
	case "none":
		verdict = len(found) == 0
	}
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"missing_metadata_keys": nonNil(missing), "found_metadata_keys": nonNil(found), "operator": op,
	}}, nil
}

// AllowedRequestTypes (llm.checks.allowedRequestTypes) allows or blocks
// request types by the reference's names (chatComplete, complete, embed,
// stream-chatComplete, …): "allowedTypes" and "blockedTypes", arrays or
// comma-separated strings; without them the request metadata keys
// supported_endpoints / blocked_endpoints. Neither: everything passes;
// blocked wins over allowed; a type in both lists is an error.
type AllowedRequestTypes struct{}

// CaddyModule implements caddy.Module.
func (AllowedRequestTypes) CaddyModule() caddy.ModuleInfo {
	return info("allowedRequestTypes", func() caddy.Module { return new(AllowedRequestTypes) })
}

// Check implements guardrails.Check.
func (AllowedRequestTypes) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	list := func(param, meta string) []string {
		if l, ok := stringList(gjson.GetBytes(params, param), true); ok && len(l) > 0 {
			return l
		}
		if v, ok := in.Metadata[meta]; ok {
			if l, ok := stringList(gjson.Parse(v), false); ok && len(v) > 0 && v[0] == '[' {
				return l
			}
			l, _ := stringList(gjson.Result{Type: gjson.String, Str: v}, true)
			return l
		}
		return nil
	}
	allowed := list("allowedTypes", "supported_endpoints")
	blocked := list("blockedTypes", "blocked_endpoints")
	for _, a := range allowed {
		if slices.Contains(blocked, a) {
			return guardrails.Verdict{}, fmt.Errorf("request type %q is both allowed and blocked", a)
		}
	}
	t := in.RequestType
	if t == "" {
		return guardrails.Verdict{}, errors.New("missing request type")
	}
	var verdict bool
	switch {
	case len(allowed) == 0 && len(blocked) == 0:
		verdict = true
	case slices.Contains(blocked, t):
		verdict = false
	case len(allowed) == 0:
		verdict = true
	default:
		verdict = slices.Contains(allowed, t)
	}
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"requestType": t, "allowedTypes": nonNil(allowed), "blockedTypes": nonNil(blocked), "verdict": verdict,
	}}, nil
}
