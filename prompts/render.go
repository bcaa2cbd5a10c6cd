package prompts

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// bodyFieldsNotOverrides are the render/completions body fields that are
// not chat-completion hyperparameters. prompt_id is what the portkey-ai
// SDK sends beside the variables on render (its promptID option,
// snake-cased); it is tolerated and ignored.
var bodyFieldsNotOverrides = map[string]bool{"variables": true, "prompt_id": true, "promptID": true}

// RenderRequest validates the body of a render or completions request and
// returns the chat-completion request body it stands for: the version's
// messages rendered with the body's variables, the model, the saved
// hyperparameters, and the body's top-level hyperparameters, which win
// over saved ones. stream is included only when the body or the version
// gives it. The result can be sent unchanged to /v1/chat/completions.
//
// The body must be a JSON object with a "variables" object. Any other
// top-level field is a hyperparameter override, except "prompt_id" (the
// portkey-ai SDK sends it on render; ignored) and except fields whose
// value is null, which are ignored so that SDKs that send every optional
// parameter as null do not erase saved values. A nested "hyperparameters"
// object and a "messages" field are rejected rather than silently
// ignored. A variable the template needs but the body does not give is a
// 400 naming it (see checkVariables for sections); extra variables are
// ignored. Errors are *apierror.Error.
func RenderRequest(p *Prompt, v *Version, body []byte) ([]byte, error) {
	if v == nil || v.compiled == nil {
		return nil, apierror.New(http.StatusInternalServerError, apierror.TypeServer, "prompt version is not compiled")
	}
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, apierror.BadRequest("variables", "the body must be a JSON object with a variables object")
	}
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, apierror.BadRequest("", "the body must be a JSON object with a variables object")
	}
	if _, ok := fields["hyperparameters"]; ok {
		return nil, apierror.BadRequest("hyperparameters", "give hyperparameters at the top level of the body, beside variables (e.g. {\"variables\":{…},\"temperature\":0.2}); a nested hyperparameters object is not supported")
	}
	if _, ok := fields["messages"]; ok {
		return nil, apierror.BadRequest("messages", "messages come from the prompt's template and cannot be given in the body")
	}
	vars, err := decodeVariables(fields["variables"])
	if err != nil {
		return nil, err
	}
	for i := range v.compiled {
		if err := checkMessage(&v.compiled[i], vars); err != nil {
			return nil, err
		}
	}

	out := make([]byte, 0, 512+len(body))
	out = append(out, `{"messages":`...)
	if out, err = renderMessages(out, v.compiled, vars); err != nil {
		return nil, apierror.BadRequest("variables", "rendering prompt %s version %d: %v", p.Slug, v.Number, err)
	}

	model := v.Model
	if raw, ok := fields["model"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &model); err != nil {
			return nil, apierror.BadRequest("model", "model must be a string")
		}
	}
	if model != "" {
		out = append(out, `,"model":`...)
		out = oaiwire.AppendString(out, model)
	}

	keys := make([]string, 0, len(v.Hyperparameters)+len(fields))
	for k := range v.Hyperparameters {
		if raw, ok := fields[k]; !ok || isNull(raw) {
			keys = append(keys, k)
		}
	}
	for k, raw := range fields {
		if !bodyFieldsNotOverrides[k] && k != "model" && !isNull(raw) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw, ok := fields[k]
		if !ok || isNull(raw) {
			raw = v.Hyperparameters[k]
		}
		out = append(out, ',')
		out = oaiwire.AppendString(out, k)
		out = append(out, ':')
		out = append(out, bytes.TrimSpace(raw)...)
	}
	return append(out, '}'), nil
}

// decodeVariables parses the variables object, keeping numbers as written
// (json.Number) so 3 renders as "3" and big integers keep every digit.
func decodeVariables(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return nil, apierror.BadRequest("variables", "variables is required: an object of the values the template uses")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var vars map[string]any
	if err := dec.Decode(&vars); err != nil || vars == nil {
		return nil, apierror.BadRequest("variables", "variables must be a JSON object")
	}
	nullsToEmpty(vars)
	return vars, nil
}

// checkMessage runs checkVariables over every template of one message.
func checkMessage(m *compiledMessage, vars map[string]any) error {
	chain := []any{vars}
	if m.text != nil {
		if err := checkVariables(m.tags, chain); err != nil {
			return missingErr(err)
		}
	}
	for _, p := range m.parts {
		if p.text != nil {
			if err := checkVariables(p.tags, chain); err != nil {
				return missingErr(err)
			}
		}
	}
	return nil
}

func missingErr(err error) error {
	if m, ok := err.(*missingVariableError); ok {
		return apierror.BadRequest("variables."+m.name, "variable %q is used by the prompt's template but missing from variables", m.name).WithCode("missing_variable")
	}
	return apierror.BadRequest("variables", "%v", err)
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
