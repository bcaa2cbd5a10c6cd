package gemini

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// maxSchemaDepth bounds $ref expansion and nesting, so a recursive schema
// cannot loop.
const maxSchemaDepth = 24

// CleanSchema rewrites a JSON Schema (OpenAI tool parameters or a
// json_schema response format) into the OpenAPI subset Gemini's
// `parameters` and `responseSchema` accept: local $refs are inlined,
// type arrays and null branches become `nullable`, const becomes enum,
// and keywords Gemini rejects ($schema, additionalProperties, unsupported
// string formats, …) are dropped. required keeps only listed properties.
// It returns nil for an empty schema (no properties), which Gemini
// rejects and which means "no parameters" anyway.
func CleanSchema(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	defs, _ := v["$defs"].(map[string]any)
	if defs == nil {
		defs, _ = v["definitions"].(map[string]any)
	}
	out, _ := clean(v, defs, 0).(map[string]any)
	if props, ok := out["properties"].(map[string]any); out["type"] == "object" && (!ok || len(props) == 0) {
		return nil, nil
	}
	return json.Marshal(out)
}

// keptKeys are the schema keywords copied as they are.
var keptKeys = map[string]bool{
	"description": true, "title": true, "nullable": true, "enum": true, "default": true, "example": true,
	"minItems": true, "maxItems": true, "minimum": true, "maximum": true, "minLength": true, "maxLength": true,
	"pattern": true, "minProperties": true, "maxProperties": true, "propertyOrdering": true,
}

// keptFormats are the formats Gemini accepts; others are rejected.
var keptFormats = map[string]bool{"date-time": true, "enum": true, "int32": true, "int64": true, "float": true, "double": true}

func clean(v any, defs map[string]any, depth int) any {
	switch t := v.(type) {
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			out = append(out, clean(e, defs, depth+1))
		}
		return out
	case map[string]any:
		return cleanObject(t, defs, depth)
	}
	return v
}

func cleanObject(t map[string]any, defs map[string]any, depth int) any {
	if depth > maxSchemaDepth {
		return map[string]any{"type": "object"}
	}
	if ref, ok := t["$ref"].(string); ok {
		name := strings.TrimPrefix(strings.TrimPrefix(ref, "#/$defs/"), "#/definitions/")
		target, _ := defs[name].(map[string]any)
		if target == nil {
			return map[string]any{"type": "object"}
		}
		out, _ := cleanObject(target, defs, depth+1).(map[string]any)
		if d, ok := t["description"]; ok && out != nil {
			out["description"] = d
		}
		return out
	}
	out := make(map[string]any, len(t))
	for k, val := range t {
		switch {
		case k == "type":
			setType(out, val)
		case k == "properties":
			props, _ := val.(map[string]any)
			cp := make(map[string]any, len(props))
			for name, p := range props {
				cp[name] = clean(p, defs, depth+1)
			}
			out["properties"] = cp
		case k == "items":
			out["items"] = clean(val, defs, depth+1)
		case k == "anyOf" || k == "oneOf":
			cleanAnyOf(out, val, defs, depth)
		case k == "const":
			out["enum"] = []any{val}
		case k == "format":
			if s, _ := val.(string); keptFormats[s] {
				out["format"] = s
			}
		case keptKeys[k]:
			out[k] = val
		}
	}
	if req, ok := t["required"].([]any); ok {
		props, _ := out["properties"].(map[string]any)
		var keep []any
		for _, r := range req {
			if s, _ := r.(string); props[s] != nil {
				keep = append(keep, s)
			}
		}
		if len(keep) > 0 {
			out["required"] = keep
		}
	}
	if props, ok := out["properties"].(map[string]any); ok && len(props) == 0 {
		delete(out, "properties")
	}
	return out
}

// setType handles "type": ["string","null"], which Gemini spells as
// type string plus nullable.
func setType(out map[string]any, val any) {
	list, ok := val.([]any)
	if !ok {
		if s, _ := val.(string); s != "null" {
			out["type"] = val
		} else {
			out["nullable"] = true
		}
		return
	}
	var types []string
	for _, e := range list {
		if s, _ := e.(string); s == "null" {
			out["nullable"] = true
		} else if s != "" {
			types = append(types, s)
		}
	}
	sort.Strings(types)
	if len(types) > 0 {
		out["type"] = types[0]
	}
}

// cleanAnyOf drops null branches (setting nullable) and inlines a single
// remaining branch.
func cleanAnyOf(out map[string]any, val any, defs map[string]any, depth int) {
	list, _ := val.([]any)
	var branches []any
	for _, b := range list {
		m, _ := b.(map[string]any)
		if m != nil && m["type"] == "null" && len(m) == 1 {
			out["nullable"] = true
			continue
		}
		branches = append(branches, clean(b, defs, depth+1))
	}
	if len(branches) == 1 {
		if m, ok := branches[0].(map[string]any); ok {
			for k, v := range m {
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
			return
		}
	}
	if len(branches) > 0 {
		out["anyOf"] = branches
	}
}
