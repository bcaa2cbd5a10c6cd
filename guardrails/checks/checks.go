// Package checks holds the gateway's default guardrail checks, each a
// Caddy module in the llm.checks namespace (llm.checks.regexMatch, …).
// They follow the reference gateway's default plugin: its parameter names,
// verdict rules and edge cases (research/wave2.md §3.2). Configs name them
// "default.<name>" or just "<name>".
package checks

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

func init() {
	for _, m := range []caddy.Module{
		RegexMatch{}, RegexReplace{}, SentenceCount{}, WordCount{}, CharacterCount{},
		JSONSchema{}, JSONKeys{}, Contains{}, ValidURLs{}, Webhook{}, Log{},
		ContainsCode{}, AllUppercase{}, AllLowercase{}, EndsWith{}, ModelWhitelist{},
		ModelRules{}, RequiredMetadataKeys{}, AddPrefix{}, NotNull{}, AllowedRequestTypes{},
	} {
		caddy.RegisterModule(m)
	}
}

// info builds the module info of a check named name.
func info(name string, newFn func() caddy.Module) caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(guardrails.Namespace + "." + name), New: newFn}
}

// checkWith runs a Preparer's bound check, for modules called through
// Check without having been prepared.
func checkWith(p guardrails.Preparer, ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	c, err := p.Prepare(params)
	if err != nil {
		return guardrails.Verdict{}, err
	}
	return c.Check(ctx, in, params)
}

// truthy is JavaScript truthiness of a parameter, as the reference reads
// `parameters.not || false`.
func truthy(params json.RawMessage, key string) bool {
	v := gjson.GetBytes(params, key)
	switch v.Type {
	case gjson.True:
		return true
	case gjson.Number:
		return v.Num != 0
	case gjson.String:
		return v.Str != ""
	case gjson.JSON:
		return true
	}
	return false
}

// boolDefault reads a boolean parameter with a default for absent/null.
func boolDefault(params json.RawMessage, key string, def bool) bool {
	v := gjson.GetBytes(params, key)
	if !v.Exists() || v.Type == gjson.Null {
		return def
	}
	return truthy(params, key)
}

// number reads a parameter that must be a JSON number.
func number(params json.RawMessage, key string) (float64, bool) {
	v := gjson.GetBytes(params, key)
	return v.Num, v.Type == gjson.Number
}

// integer reads a parameter that must be an integral JSON number
// (JavaScript's Number.isInteger).
func integer(params json.RawMessage, key string) (float64, bool) {
	n, ok := number(params, key)
	return n, ok && n == float64(int64(n))
}

// stringList reads an array of strings, or (when commaOK) a string of
// comma-separated items.
func stringList(v gjson.Result, commaOK bool) ([]string, bool) {
	switch {
	case v.IsArray():
		var out []string
		ok := true
		v.ForEach(func(_, s gjson.Result) bool {
			if s.Type != gjson.String {
				ok = false
				return false
			}
			out = append(out, s.Str)
			return true
		})
		return out, ok
	case commaOK && v.Type == gjson.String:
		var out []string
		for _, s := range strings.Split(v.Str, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}

// utf16Len is JavaScript's String.prototype.length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// excerpt is the reference's textExcerpt: the first 100 UTF-16 units and
// "..." when longer.
func excerpt(s string) string {
	if utf16Len(s) <= 100 {
		return s
	}
	n := 0
	for i, r := range s {
		if n+utf16.RuneLen(r) > 100 {
			return s[:i] + "..."
		}
		n += utf16.RuneLen(r)
	}
	return s
}

// utf16Index converts a byte offset in s to a UTF-16 index.
func utf16Index(s string, byteOff int) int {
	n := 0
	for i := 0; i < byteOff && i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += utf16.RuneLen(r)
		i += size
	}
	return n
}

// invert applies the "not" parameter.
func invert(v, not bool) bool { return v != not }
