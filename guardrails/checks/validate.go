package checks

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// Load-time validation. A check whose required parameter is missing or of
// the wrong type can never judge anything: at run time it errors, and an
// errored check passes unless failOnError, so `wordCount` without
// `maxWords` passed everything. Each check with required parameters
// implements guardrails.Validator, and the config is refused instead (a
// 400 for a request's config, a load error for a saved one), naming the
// parameter. Optional parameters keep their run-time reading.

// param describes one required parameter and how to test it.
type param struct {
	name string
	kind string // what the value must be, for the message
	ok   func(v gjson.Result) bool
}

func isNumber(v gjson.Result) bool { return v.Type == gjson.Number }

func isInteger(v gjson.Result) bool { return v.Type == gjson.Number && v.Num == float64(int64(v.Num)) }

func isNonEmptyString(v gjson.Result) bool { return v.Type == gjson.String && v.Str != "" }

func isString(v gjson.Result) bool { return v.Type == gjson.String }

func isObject(v gjson.Result) bool { return v.IsObject() }

func isStringArray(v gjson.Result) bool { _, ok := stringList(v, false); return ok }

func isNonEmptyStringArray(v gjson.Result) bool {
	l, ok := stringList(v, false)
	return ok && len(l) > 0
}

func oneOf(values ...string) func(gjson.Result) bool {
	return func(v gjson.Result) bool { return v.Type == gjson.String && slices.Contains(values, v.Str) }
}

var (
	numberParam    = func(n string) param { return param{n, "a number", isNumber} }
	integerParam   = func(n string) param { return param{n, "an integer", isInteger} }
	stringParam    = func(n string) param { return param{n, "a non-empty string", isNonEmptyString} }
	operatorParam  = param{"operator", `"any", "all" or "none"`, oneOf("any", "all", "none")}
	keysOperator   = param{"operator", `"all", "any" or "none"`, oneOf("all", "any", "none")}
	nonEmptyList   = func(n string) param { return param{n, "a non-empty array of strings", isNonEmptyStringArray} }
	stringList2    = func(n string) param { return param{n, "an array of strings", isStringArray} }
	objectParam    = func(n string) param { return param{n, "a JSON object", isObject} }
	anyStringParam = func(n string) param { return param{n, "a string", isString} }
)

// validate checks params against the required ones, reporting the first
// missing or mistyped one.
func validate(params json.RawMessage, required ...param) error {
	for _, p := range required {
		v := gjson.GetBytes(params, gjson.Escape(p.name))
		if !v.Exists() || v.Type == gjson.Null {
			return fmt.Errorf("missing required parameter %q (%s)", p.name, p.kind)
		}
		if !p.ok(v) {
			return fmt.Errorf("parameter %q must be %s", p.name, p.kind)
		}
	}
	return nil
}

// Validate implements guardrails.Validator.
func (RegexMatch) Validate(p json.RawMessage) error { return validate(p, stringParam("rule")) }

// Validate implements guardrails.Validator.
func (RegexReplace) Validate(p json.RawMessage) error { return validate(p, stringParam("rule")) }

// Validate implements guardrails.Validator.
func (SentenceCount) Validate(p json.RawMessage) error {
	return validate(p, numberParam("minSentences"), numberParam("maxSentences"))
}

// Validate implements guardrails.Validator.
func (WordCount) Validate(p json.RawMessage) error {
	return validate(p, integerParam("minWords"), integerParam("maxWords"))
}

// Validate implements guardrails.Validator.
func (CharacterCount) Validate(p json.RawMessage) error {
	return validate(p, integerParam("minCharacters"), integerParam("maxCharacters"))
}

// Validate implements guardrails.Validator; Prepare compiles the schema.
func (JSONSchema) Validate(p json.RawMessage) error { return validate(p, objectParam("schema")) }

// Validate implements guardrails.Validator.
func (JSONKeys) Validate(p json.RawMessage) error {
	return validate(p, nonEmptyList("keys"), operatorParam)
}

// Validate implements guardrails.Validator.
func (Contains) Validate(p json.RawMessage) error {
	return validate(p, stringList2("words"), operatorParam)
}

// Validate implements guardrails.Validator: the URL, headers and timeout
// are read as a call would read them.
func (Webhook) Validate(p json.RawMessage) error { return validateRemote(p, "webhookURL") }

// Validate implements guardrails.Validator.
func (Log) Validate(p json.RawMessage) error { return validateRemote(p, "logURL") }

// validateRemote checks a webhook's or log's parameters without quoting
// the URL, which may carry credentials.
func validateRemote(p json.RawMessage, urlKey string) error {
	if err := validate(p, stringParam(urlKey)); err != nil {
		return err
	}
	if t := gjson.GetBytes(p, "timeout"); t.Exists() && t.Type != gjson.Null && t.Type != gjson.Number {
		return fmt.Errorf("parameter %q must be a number of milliseconds", "timeout")
	}
	_, _, _, err := remoteParams(p, urlKey)
	return err
}

// Validate implements guardrails.Validator.
func (ContainsCode) Validate(p json.RawMessage) error { return validate(p, stringParam("format")) }

// Validate implements guardrails.Validator.
func (EndsWith) Validate(p json.RawMessage) error { return validate(p, stringParam("suffix")) }

// Validate implements guardrails.Validator.
func (ModelWhitelist) Validate(p json.RawMessage) error {
	return validate(p, stringList2("models"))
}

// Validate implements guardrails.Validator: rules needs defaults or
// metadata, each of the documented shape.
func (ModelRules) Validate(p json.RawMessage) error {
	if err := validate(p, objectParam("rules")); err != nil {
		return err
	}
	rules := gjson.GetBytes(p, "rules")
	d, m := rules.Get("defaults"), rules.Get("metadata")
	if !d.Exists() && !m.Exists() {
		return fmt.Errorf(`parameter "rules" needs "defaults" or "metadata"`)
	}
	if d.Exists() && !isStringArray(d) {
		return fmt.Errorf(`parameter "rules.defaults" must be an array of strings`)
	}
	if m.Exists() {
		if !m.IsObject() {
			return fmt.Errorf(`parameter "rules.metadata" must be an object of {value: [models]} objects`)
		}
		var err error
		m.ForEach(func(k, byValue gjson.Result) bool {
			if !byValue.IsObject() {
				err = fmt.Errorf(`parameter "rules.metadata.%s" must be an object of {value: [models]}`, k.Str)
				return false
			}
			byValue.ForEach(func(v, models gjson.Result) bool {
				if !isStringArray(models) {
					err = fmt.Errorf(`parameter "rules.metadata.%s.%s" must be an array of strings`, k.Str, v.Str)
				}
				return err == nil
			})
			return err == nil
		})
		return err
	}
	return nil
}

// Validate implements guardrails.Validator.
func (RequiredMetadataKeys) Validate(p json.RawMessage) error {
	return validate(p, nonEmptyList("metadataKeys"), keysOperator)
}

// Validate implements guardrails.Validator.
func (AddPrefix) Validate(p json.RawMessage) error { return validate(p, anyStringParam("prefix")) }

// Validate implements guardrails.Validator: both lists are optional
// (request metadata may give them), but given they must be lists, and
// not name a type in both.
func (AllowedRequestTypes) Validate(p json.RawMessage) error {
	lists := map[string][]string{}
	for _, name := range []string{"allowedTypes", "blockedTypes"} {
		v := gjson.GetBytes(p, name)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		l, ok := stringList(v, true)
		if !ok {
			return fmt.Errorf("parameter %q must be an array of strings or a comma-separated string", name)
		}
		lists[name] = l
	}
	for _, a := range lists["allowedTypes"] {
		if slices.Contains(lists["blockedTypes"], a) {
			return fmt.Errorf("request type %q is both allowed and blocked", a)
		}
	}
	return nil
}

// Interface guards.
var (
	_ guardrails.Validator = RegexMatch{}
	_ guardrails.Validator = RegexReplace{}
	_ guardrails.Validator = SentenceCount{}
	_ guardrails.Validator = WordCount{}
	_ guardrails.Validator = CharacterCount{}
	_ guardrails.Validator = JSONSchema{}
	_ guardrails.Validator = JSONKeys{}
	_ guardrails.Validator = Contains{}
	_ guardrails.Validator = Webhook{}
	_ guardrails.Validator = Log{}
	_ guardrails.Validator = ContainsCode{}
	_ guardrails.Validator = EndsWith{}
	_ guardrails.Validator = ModelWhitelist{}
	_ guardrails.Validator = ModelRules{}
	_ guardrails.Validator = RequiredMetadataKeys{}
	_ guardrails.Validator = AddPrefix{}
	_ guardrails.Validator = AllowedRequestTypes{}
)
