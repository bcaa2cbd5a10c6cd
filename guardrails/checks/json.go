package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

var (
	fencedJSON = regexp.MustCompile("```json\\s*([\\s\\S]*?)\\s*```")
	// braces is the reference's non-greedy brace match: it truncates
	// unfenced nested JSON, which then does not parse (documented quirk).
	braces = regexp.MustCompile(`\{[\s\S]*?\}`)
)

// jsonCandidates extracts JSON texts from an answer: fenced ```json
// blocks, and when withBraces (or when there are none) brace matches.
func jsonCandidates(text string, withBraces bool) []string {
	var out []string
	for _, m := range fencedJSON.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	if withBraces || len(out) == 0 {
		out = append(out, braces.FindAllString(text, -1)...)
	}
	return out
}

// parseCandidate decodes one candidate, refusing deep nesting first.
func parseCandidate(s string) (any, bool) {
	if jsonlimit.Check([]byte(s)) != nil {
		return nil, false
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	return v, err == nil
}

// refuseLoader stops schemas from loading $refs from files or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed", url)
}

// JSONSchema (llm.checks.jsonSchema) passes when JSON in the answer
// (a fenced ```json block, or else a {…} match) validates against
// "schema" (JSON Schema 2020-12 unless it says otherwise; external $refs
// are refused); "not" inverts.
type JSONSchema struct{}

// CaddyModule implements caddy.Module.
func (JSONSchema) CaddyModule() caddy.ModuleInfo {
	return info("jsonSchema", func() caddy.Module { return new(JSONSchema) })
}

// Prepare compiles the schema; a schema that does not compile rejects the
// config.
func (JSONSchema) Prepare(params json.RawMessage) (guardrails.Check, error) {
	raw := gjson.GetBytes(params, "schema")
	if !raw.IsObject() {
		return guardrails.CheckFunc(func(context.Context, *guardrails.Input, json.RawMessage) (guardrails.Verdict, error) {
			return guardrails.Verdict{}, errors.New("missing or invalid JSON schema")
		}), nil
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw.Raw))
	if err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource("guardrail-schema.json", doc); err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	sch, err := c.Compile("guardrail-schema.json")
	if err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	not := truthy(params, "not")
	return guardrails.CheckFunc(func(_ context.Context, in *guardrails.Input, _ json.RawMessage) (guardrails.Verdict, error) {
		text := in.Text()
		cands := jsonCandidates(text, false)
		if len(cands) == 0 {
			return guardrails.Verdict{Pass: false, Data: map[string]any{
				"explanation": "No valid JSON found in the response.", "not": not,
			}}, nil
		}
		var first any
		var firstErrs []map[string]string
		parsed := false
		for _, cand := range cands {
			v, ok := parseCandidate(cand)
			if !ok {
				continue
			}
			verr := sch.Validate(v)
			if verr == nil {
				verdict := invert(true, not)
				return guardrails.Verdict{Pass: verdict, Data: map[string]any{
					"matchedJson": v, "validationErrors": []any{}, "not": not, "verdict": verdict,
					"explanation": "The JSON in the response matches the schema.",
				}}, nil
			}
			if !parsed {
				parsed, first, firstErrs = true, v, validationErrors(verr)
			}
		}
		if !parsed {
			return guardrails.Verdict{Pass: false}, nil
		}
		verdict := invert(false, not)
		return guardrails.Verdict{Pass: verdict, Data: map[string]any{
			"matchedJson": first, "validationErrors": firstErrs, "not": not, "verdict": verdict,
			"explanation": "The JSON in the response does not match the schema.",
		}}, nil
	}), nil
}

// Check implements guardrails.Check.
func (c JSONSchema) Check(ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	return checkWith(c, ctx, in, params)
}

func validationErrors(err error) []map[string]string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []map[string]string{{"path": "", "message": err.Error()}}
	}
	var out []map[string]string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil {
			out = append(out, map[string]string{"path": u.InstanceLocation, "message": u.Error.String()})
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*ve.BasicOutput())
	return out
}

// JSONKeys (llm.checks.jsonKeys) looks for top-level "keys" in the JSON
// objects of the answer (fenced blocks and {…} matches) with "operator"
// any, all or none; the best-matching object is reported. No JSON fails
// without error.
type JSONKeys struct{}

// CaddyModule implements caddy.Module.
func (JSONKeys) CaddyModule() caddy.ModuleInfo {
	return info("jsonKeys", func() caddy.Module { return new(JSONKeys) })
}

// Check implements guardrails.Check.
func (JSONKeys) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	text := in.Text()
	if text == "" {
		return guardrails.Verdict{}, errors.New("missing text to analyze")
	}
	keys, ok := stringList(gjson.GetBytes(params, "keys"), false)
	if !ok || len(keys) == 0 {
		return guardrails.Verdict{}, errors.New("keys: must be a non-empty array of strings")
	}
	op := gjson.GetBytes(params, "operator").Str
	if op != "any" && op != "all" && op != "none" {
		return guardrails.Verdict{}, errors.New(`operator: must be "any", "all" or "none"`)
	}
	type match struct {
		json             gjson.Result
		present, missing []string
		ok               bool
	}
	var best *match
	for _, cand := range jsonCandidates(text, true) {
		if jsonlimit.Check([]byte(cand)) != nil {
			continue
		}
		obj := gjson.Parse(cand)
		if !obj.IsObject() {
			continue
		}
		m := &match{json: obj}
		for _, k := range keys {
			if obj.Get(gjson.Escape(k)).Exists() {
				m.present = append(m.present, k)
			} else {
				m.missing = append(m.missing, k)
			}
		}
		switch op {
		case "any":
			m.ok = len(m.present) > 0
		case "all":
			m.ok = len(m.missing) == 0
		case "none":
			m.ok = len(m.present) == 0
		}
		if best == nil || (m.ok && !best.ok) || (m.ok == best.ok && op != "none" && len(m.present) > len(best.present)) {
			best = m
		}
		if m.ok {
			break
		}
	}
	if best == nil {
		return guardrails.Verdict{Pass: false, Data: map[string]any{
			"explanation": "No valid JSON found in the response.", "operator": op,
		}}, nil
	}
	return guardrails.Verdict{Pass: best.ok, Data: map[string]any{
		"matchedJson": json.RawMessage(best.json.Raw), "presentKeys": nonNil(best.present),
		"missingKeys": nonNil(best.missing), "operator": op, "verdict": best.ok,
	}}, nil
}
