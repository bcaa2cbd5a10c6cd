package handlers

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

type numRange struct {
	field    string
	min, max float64
	integer  bool
}

// completionBounds is the spec's text-completion bounds table. Null values
// mean "use the default" and are accepted.
var completionBounds = []numRange{
	{"best_of", 0, 20, true},
	{"frequency_penalty", -2, 2, false},
	{"presence_penalty", -2, 2, false},
	{"logprobs", 0, 5, true},
	{"max_tokens", 0, 1 << 53, true},
	{"n", 1, 128, true},
	{"temperature", 0, 2, false},
	{"top_p", 0, 1, false},
	{"seed", -(1 << 63), 1<<63 - 1, true},
}

// validateCompletion checks a /completions body against the spec before
// any upstream call, so a client learns which field is wrong without
// spending a provider request.
func validateCompletion(body []byte) error {
	if !gjson.GetBytes(body, "model").Exists() || gjson.GetBytes(body, "model").Type != gjson.String {
		return apierror.BadRequest("model", "model is required and must be a string")
	}
	prompt := gjson.GetBytes(body, "prompt")
	if !prompt.Exists() {
		return apierror.BadRequest("prompt", "prompt is required")
	}
	if prompt.Type != gjson.String && !prompt.IsArray() {
		return apierror.BadRequest("prompt", "prompt must be a string, an array of strings, an array of tokens or an array of token arrays")
	}
	for _, b := range completionBounds {
		v := gjson.GetBytes(body, b.field)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		if v.Type != gjson.Number {
			return apierror.BadRequest(b.field, "%s must be a number", b.field)
		}
		f := v.Float()
		if b.integer && f != float64(int64(f)) {
			return apierror.BadRequest(b.field, "%s must be an integer", b.field)
		}
		if f < b.min || f > b.max {
			return apierror.BadRequest(b.field, "%s must be between %g and %g, got %s", b.field, b.min, b.max, v.Raw)
		}
	}
	n := gjson.GetBytes(body, "n")
	bestOf := gjson.GetBytes(body, "best_of")
	if bestOf.Type == gjson.Number && n.Type == gjson.Number && bestOf.Int() > 1 && bestOf.Int() <= n.Int() {
		return apierror.BadRequest("best_of", "best_of must be greater than n when both are given")
	}
	stream := gjson.GetBytes(body, "stream").Bool()
	if stream && bestOf.Type == gjson.Number && bestOf.Int() > 1 {
		return apierror.BadRequest("best_of", "results cannot be streamed when best_of is greater than 1")
	}
	if so := gjson.GetBytes(body, "stream_options"); so.Exists() && so.Type != gjson.Null && !stream {
		return apierror.BadRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	if stop := gjson.GetBytes(body, "stop"); stop.Exists() && stop.Type != gjson.Null {
		switch {
		case stop.Type == gjson.String:
		case stop.IsArray():
			if len(stop.Array()) > 4 {
				return apierror.BadRequest("stop", "stop allows up to 4 sequences")
			}
		default:
			return apierror.BadRequest("stop", "stop must be a string or an array of strings")
		}
	}
	if lb := gjson.GetBytes(body, "logit_bias"); lb.Exists() && lb.Type != gjson.Null {
		if !lb.IsObject() {
			return apierror.BadRequest("logit_bias", "logit_bias must be an object mapping token ids to biases")
		}
		var bad error
		lb.ForEach(func(k, v gjson.Result) bool {
			if v.Type != gjson.Number || v.Float() < -100 || v.Float() > 100 {
				bad = apierror.BadRequest("logit_bias", "logit_bias[%s] must be a number from -100 to 100", k.String())
				return false
			}
			return true
		})
		if bad != nil {
			return bad
		}
	}
	for _, f := range []string{"echo", "stream"} {
		if v := gjson.GetBytes(body, f); v.Exists() && v.Type != gjson.Null && v.Type != gjson.True && v.Type != gjson.False {
			return apierror.BadRequest(f, "%s must be a boolean", f)
		}
	}
	return nil
}
