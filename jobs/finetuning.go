package jobs

import (
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// FineTuningMethods are the method.type values OpenAI accepts.
var FineTuningMethods = []string{"supervised", "dpo", "reinforcement"}

// hyperBound is the accepted range of one numeric hyperparameter, which
// may also be the string "auto" (OpenAI, CreateFineTuningJobRequest).
type hyperBound struct {
	name     string
	min, max float64
	integer  bool
	minOpen  bool // min itself is refused (learning_rate_multiplier > 0)
}

var hyperBounds = []hyperBound{
	{name: "batch_size", min: 1, max: 256, integer: true},
	{name: "learning_rate_multiplier", min: 0, max: 1e9, minOpen: true},
	{name: "n_epochs", min: 1, max: 50, integer: true},
	{name: "beta", min: 0, max: 2},
}

// CheckFineTuningCreate validates a POST /v1/fine_tuning/jobs body:
// model, training_file, suffix (1–64 characters) and method (with a
// known type) are required, integrations at most 5, metadata within the
// batch limits, hyperparameters within OpenAI's ranges.
func CheckFineTuningCreate(body []byte) error {
	obj, err := parseObject(body)
	if err != nil {
		return err
	}
	for _, f := range []string{"model", "training_file", "suffix"} {
		if _, err := requiredString(obj, f); err != nil {
			return err
		}
	}
	if n := utf8.RuneCountInString(obj.Get("suffix").Str); n > MaxSuffix {
		return apierror.BadRequest("suffix", "'suffix' may be at most %d characters", MaxSuffix)
	}
	if v := obj.Get("validation_file"); v.Exists() && v.Type != gjson.Null && v.Type != gjson.String {
		return apierror.BadRequest("validation_file", "'validation_file' must be a string")
	}
	m := obj.Get("method")
	if !m.Exists() || m.Type == gjson.Null {
		return apierror.BadRequest("method", "'method' is required")
	}
	if !m.IsObject() {
		return apierror.BadRequest("method", "'method' must be an object")
	}
	typ := m.Get("type")
	if !typ.Exists() || typ.Type != gjson.String || !oneOf(typ.Str, FineTuningMethods) {
		return apierror.BadRequest("method.type", "'method.type' must be one of supervised, dpo, reinforcement")
	}
	if err := checkHyper(m.Get(gjson.Escape(typ.Str)+".hyperparameters"), "method."+typ.Str+".hyperparameters"); err != nil {
		return err
	}
	if typ.Str == "reinforcement" && !m.Get("reinforcement.grader").IsObject() {
		return apierror.BadRequest("method.reinforcement.grader", "'method.reinforcement.grader' is required for reinforcement fine-tuning")
	}
	if err := checkHyper(obj.Get("hyperparameters"), "hyperparameters"); err != nil {
		return err
	}
	if in := obj.Get("integrations"); in.Exists() && in.Type != gjson.Null {
		if !in.IsArray() {
			return apierror.BadRequest("integrations", "'integrations' must be an array")
		}
		if n := len(in.Array()); n > MaxIntegrations {
			return apierror.BadRequest("integrations", "'integrations' may hold at most %d items, got %d", MaxIntegrations, n)
		}
	}
	if s := obj.Get("seed"); s.Exists() && s.Type != gjson.Null {
		if s.Type != gjson.Number || s.Num != float64(int64(s.Num)) || s.Num < 0 || s.Num > 2147483647 {
			return apierror.BadRequest("seed", "'seed' must be an integer from 0 to 2147483647")
		}
	}
	return CheckMetadata(obj.Get("metadata"))
}

func checkHyper(h gjson.Result, prefix string) error {
	if !h.Exists() || h.Type == gjson.Null {
		return nil
	}
	if !h.IsObject() {
		return apierror.BadRequest(prefix, "'%s' must be an object", prefix)
	}
	for _, b := range hyperBounds {
		v := h.Get(b.name)
		if !v.Exists() || v.Type == gjson.Null || (v.Type == gjson.String && v.Str == "auto") {
			continue
		}
		param := prefix + "." + b.name
		ok := v.Type == gjson.Number && v.Num <= b.max && (v.Num > b.min || (!b.minOpen && v.Num == b.min))
		if ok && b.integer && v.Num != float64(int64(v.Num)) {
			ok = false
		}
		if !ok {
			if b.minOpen {
				return apierror.BadRequest(param, "'%s' must be \"auto\" or a number greater than %g", param, b.min)
			}
			return apierror.BadRequest(param, "'%s' must be \"auto\" or a number from %g to %g", param, b.min, b.max)
		}
	}
	return nil
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}
