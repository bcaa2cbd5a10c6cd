package routing

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// configSchemaJSON is the JSON Schema (draft 2020-12) of the spec's
// configuration object. It is the single source of truth for what a
// configuration may contain; Config is decoded only after it accepted.
//
//go:embed schema.json
var configSchemaJSON []byte

// configSchemaURL names the embedded schema inside the compiler. It matches
// the schema's $id and is never fetched.
const configSchemaURL = "https://caddy-llm-gateway.invalid/schemas/config.json"

// schemaRoot is the name paths in error messages start with.
const schemaRoot = "config"

var (
	schemaOnce     sync.Once
	schemaCompiled *jsonschema.Schema
	schemaErr      error
	// schemaGroups lists the root anyOf groups of required keys, as
	// "provider+api_key, virtual_key, ...", for error messages. It is read
	// from the schema itself so message and rule cannot drift apart.
	schemaGroups string
)

// schemaPrinter renders error kinds this file has no wording of its own for.
var schemaPrinter = message.NewPrinter(language.English)

// loadConfigSchema compiles the embedded schema on first use. A compiled
// *jsonschema.Schema is immutable and safe for concurrent Validate calls.
func loadConfigSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(configSchemaJSON))
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(configSchemaURL, doc); err != nil {
			schemaErr = err
			return
		}
		schemaCompiled, schemaErr = c.Compile(configSchemaURL)
		schemaGroups = strings.Join(schemaRequiredGroups(doc), ", ")
	})
	return schemaCompiled, schemaErr
}

// schemaRequiredGroups returns the root anyOf's required-key groups, each joined
// with "+".
func schemaRequiredGroups(doc any) []string {
	root, _ := doc.(map[string]any)
	anyOf, _ := root["anyOf"].([]any)
	groups := make([]string, 0, len(anyOf))
	for _, alt := range anyOf {
		m, _ := alt.(map[string]any)
		req, _ := m["required"].([]any)
		keys := make([]string, 0, len(req))
		for _, k := range req {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			}
		}
		if len(keys) > 0 {
			groups = append(groups, strings.Join(keys, "+"))
		}
	}
	return groups
}

// ValidateConfig checks raw (a JSON configuration object) against the
// embedded schema. It returns nil or an *apierror.Error with Status 400,
// Type apierror.TypeInvalidRequest, Param set to the JSON path of the most
// specific offending location (e.g.
// "config.targets[1].cb_config.cooldown_interval"), and a Message naming
// that path and the violated rule, e.g. "invalid config:
// config.targets[1].cb_config.cooldown_interval: must be >= 30000 but found
// 29999".
//
// It is safe for concurrent use; the schema is compiled once.
func ValidateConfig(raw []byte) error {
	sch, err := loadConfigSchema()
	if err != nil {
		return apierror.New(http.StatusInternalServerError, apierror.TypeServer,
			"configuration schema unavailable")
	}
	// Bounded first: the schema walk and the decoder recurse per level.
	if jsonlimit.Depth(raw, jsonlimit.MaxDepth) > jsonlimit.MaxDepth {
		return apierror.BadRequest(schemaRoot, "invalid config: %v", jsonlimit.ErrTooDeep)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return apierror.BadRequest(schemaRoot,
			"invalid config: config must be a JSON object (%s)", err.Error())
	}
	if _, ok := inst.(map[string]any); !ok {
		return apierror.BadRequest(schemaRoot,
			"invalid config: config must be a JSON object but found %s", schemaDescribeValue(inst))
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return apierror.BadRequest(schemaRoot, "invalid config: %s", err.Error())
	}
	return schemaExplain(verr, inst)
}

// schemaFailure is one leaf failure of the validation tree.
type schemaFailure struct {
	err *jsonschema.ValidationError
	// group marks the root anyOf of required-key groups failing for an
	// object: true, but rarely what a user needs to read when a more
	// specific failure exists (a typo'd key also makes every group miss).
	group bool
}

// schemaCollect flattens the validation tree to its leaves, keeping a failed
// required-key-groups anyOf as a single leaf.
func schemaCollect(e *jsonschema.ValidationError, out []schemaFailure) []schemaFailure {
	if _, ok := e.ErrorKind.(*kind.AnyOf); ok && schemaIsGroupMiss(e) {
		return append(out, schemaFailure{err: e, group: true})
	}
	if len(e.Causes) == 0 {
		return append(out, schemaFailure{err: e})
	}
	for _, c := range e.Causes {
		out = schemaCollect(c, out)
	}
	return out
}

// schemaIsGroupMiss reports whether an anyOf failure consists only of missing
// required keys, which in this schema is the required-key-groups rule.
func schemaIsGroupMiss(e *jsonschema.ValidationError) bool {
	if len(e.Causes) == 0 {
		return false
	}
	for _, c := range e.Causes {
		if _, ok := c.ErrorKind.(*kind.Required); !ok {
			return false
		}
	}
	return true
}

// schemaKindRank orders failures at the same location: a wrong value beats an
// unknown key, which beats a missing key.
func schemaKindRank(k jsonschema.ErrorKind) int {
	switch k.(type) {
	case *kind.Required:
		return 1
	case *kind.AdditionalProperties:
		return 2
	default:
		return 3
	}
}

// schemaBetter reports whether a is a more useful failure to report than b:
// specific failures beat required-key-group misses, then the deepest
// location wins, then the kind, then the path for determinism (the
// validator visits object keys in map order).
func schemaBetter(a, b schemaFailure, pa, pb string) bool {
	if a.group != b.group {
		return !a.group
	}
	if la, lb := len(a.err.InstanceLocation), len(b.err.InstanceLocation); la != lb {
		return la > lb
	}
	if ra, rb := schemaKindRank(a.err.ErrorKind), schemaKindRank(b.err.ErrorKind); ra != rb {
		return ra > rb
	}
	return pa < pb
}

// schemaExplain turns a validation failure into the 400 a client reads.
func schemaExplain(verr *jsonschema.ValidationError, inst any) *apierror.Error {
	cands := schemaCollect(verr, make([]schemaFailure, 0, 8))
	if len(cands) == 0 {
		return apierror.BadRequest(schemaRoot, "invalid config: %s", verr.Error())
	}
	best, bestPath := cands[0], schemaPath(inst, cands[0].err.InstanceLocation)
	for _, c := range cands[1:] {
		p := schemaPath(inst, c.err.InstanceLocation)
		if schemaBetter(c, best, p, bestPath) {
			best, bestPath = c, p
		}
	}
	e := best.err
	if best.group {
		return apierror.BadRequest(bestPath,
			"invalid config: %s: must contain at least one of the required key groups (%s)",
			bestPath, schemaGroups)
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		param := bestPath + "." + k.Missing[0]
		var rule string
		if len(k.Missing) == 1 {
			rule = "missing required key " + strconv.Quote(k.Missing[0])
		} else {
			rule = "missing required keys " + schemaQuoteList(k.Missing)
		}
		if strings.HasSuffix(e.SchemaURL, "/$defs/strategy/then") {
			rule += ` (required when mode is "conditional")`
		}
		return apierror.BadRequest(param, "invalid config: %s: %s", bestPath, rule)
	case *kind.AdditionalProperties:
		props := append([]string(nil), k.Properties...)
		sort.Strings(props)
		param := bestPath + schemaKeySegment(props[0])
		msg := "invalid config: " + param + ": unknown key " + strconv.Quote(props[0])
		if len(props) > 1 {
			msg += " (also unknown: " + schemaQuoteList(props[1:]) + ")"
		}
		return apierror.BadRequest(param, "%s", msg)
	default:
		return apierror.BadRequest(bestPath, "invalid config: %s: %s",
			bestPath, schemaDescribeRule(e.ErrorKind, schemaValueAt(inst, e.InstanceLocation)))
	}
}

// schemaDescribeRule words a value-level failure in plain terms.
func schemaDescribeRule(k jsonschema.ErrorKind, got any) string {
	switch k := k.(type) {
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = schemaWithArticle(w)
		}
		return "must be " + strings.Join(want, " or ") + " but found " + schemaDescribeValue(got)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = schemaJSONText(w)
		}
		return "must be one of " + strings.Join(want, ", ") + " but found " + schemaJSONText(k.Got)
	case *kind.Const:
		return "must be " + schemaJSONText(k.Want) + " but found " + schemaJSONText(k.Got)
	case *kind.Minimum:
		return "must be >= " + schemaRatText(k.Want) + " but found " + schemaRatText(k.Got)
	case *kind.Maximum:
		return "must be <= " + schemaRatText(k.Want) + " but found " + schemaRatText(k.Got)
	case *kind.ExclusiveMinimum:
		return "must be > " + schemaRatText(k.Want) + " but found " + schemaRatText(k.Got)
	case *kind.ExclusiveMaximum:
		return "must be < " + schemaRatText(k.Want) + " but found " + schemaRatText(k.Got)
	case *kind.FalseSchema:
		return "is not allowed"
	default:
		return k.LocalizedString(schemaPrinter)
	}
}

// schemaPath renders an instance location as config.a.b[0].c, walking the
// instance so numeric object keys are not mistaken for array indexes.
func schemaPath(inst any, loc []string) string {
	var sb strings.Builder
	sb.WriteString(schemaRoot)
	cur := inst
	for _, tok := range loc {
		switch v := cur.(type) {
		case []any:
			sb.WriteByte('[')
			sb.WriteString(tok)
			sb.WriteByte(']')
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
				cur = v[i]
			} else {
				cur = nil
			}
		case map[string]any:
			sb.WriteString(schemaKeySegment(tok))
			cur = v[tok]
		default:
			sb.WriteString(schemaKeySegment(tok))
			cur = nil
		}
	}
	return sb.String()
}

// schemaKeySegment renders one object key of a path: .key for plain keys,
// ["key"] for anything that would read ambiguously.
func schemaKeySegment(key string) string {
	plain := key != ""
	for i := 0; i < len(key) && plain; i++ {
		c := key[i]
		plain = c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if plain {
		return "." + key
	}
	return "[" + strconv.Quote(key) + "]"
}

// schemaValueAt returns the instance value at loc, or nil.
func schemaValueAt(inst any, loc []string) any {
	cur := inst
	for _, tok := range loc {
		switch v := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			cur = v[i]
		case map[string]any:
			cur = v[tok]
		default:
			return nil
		}
	}
	return cur
}

// schemaDescribeValue names a JSON value's type, with the value itself for
// short scalars: `string "3"`, `number 1.5`, `array`.
func schemaDescribeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case json.Number:
		return "number " + v.String()
	case float64:
		return "number " + strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		if len(v) > 40 {
			return "string"
		}
		return "string " + strconv.Quote(v)
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "value"
	}
}

// schemaWithArticle turns a JSON Schema type name into "a string", "an object".
func schemaWithArticle(t string) string {
	switch t {
	case "array", "integer", "object":
		return "an " + t
	case "null":
		return "null"
	default:
		return "a " + t
	}
}

// schemaJSONText renders a scalar as JSON ("fuzzy", 3, true).
func schemaJSONText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "value"
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

// schemaRatText renders a bound or number without exponent or fraction syntax.
func schemaRatText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func schemaQuoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
