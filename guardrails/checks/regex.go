package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// compileRE2 compiles a rule, explaining that it must be RE2.
func compileRE2(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("rule: %v (patterns are RE2: no lookarounds or backreferences)", err)
	}
	return re, nil
}

// RegexMatch (llm.checks.regexMatch) passes when the text matches "rule"
// (an RE2 pattern); "not" inverts.
type RegexMatch struct{}

// CaddyModule implements caddy.Module.
func (RegexMatch) CaddyModule() caddy.ModuleInfo {
	return info("regexMatch", func() caddy.Module { return new(RegexMatch) })
}

// Prepare compiles the rule; a pattern RE2 cannot compile rejects the config.
func (RegexMatch) Prepare(params json.RawMessage) (guardrails.Check, error) {
	rule := gjson.GetBytes(params, "rule")
	not := truthy(params, "not")
	if rule.Type != gjson.String || rule.Str == "" {
		return guardrails.CheckFunc(func(context.Context, *guardrails.Input, json.RawMessage) (guardrails.Verdict, error) {
			return guardrails.Verdict{}, errors.New("missing regex pattern")
		}), nil
	}
	re, err := compileRE2(rule.Str)
	if err != nil {
		return nil, err
	}
	pattern := rule.Str
	return guardrails.CheckFunc(func(_ context.Context, in *guardrails.Input, _ json.RawMessage) (guardrails.Verdict, error) {
		text := in.Text()
		if text == "" {
			return guardrails.Verdict{}, errors.New("missing text to match")
		}
		// MatchString skips capture bookkeeping; most texts do not match.
		var m []int
		if re.MatchString(text) {
			m = re.FindStringSubmatchIndex(text)
		}
		verdict := invert(m != nil, not)
		data := &regexData{RegexPattern: pattern, Not: not, Verdict: verdict, TextExcerpt: excerpt(text)}
		if m != nil {
			groups := map[string]any{}
			captures := make([]any, 0, len(m)/2-1)
			for i := 1; i < len(m)/2; i++ {
				var c any
				if m[2*i] >= 0 {
					c = text[m[2*i]:m[2*i+1]]
				}
				captures = append(captures, c)
				if name := re.SubexpNames()[i]; name != "" {
					groups[name] = c
				}
			}
			data.MatchDetails = map[string]any{
				"matchedText": text[m[0]:m[1]], "index": utf16Index(text, m[0]),
				"groups": groups, "captures": captures,
			}
		}
		switch {
		case m != nil && !not:
			data.Explanation = "The regex pattern '" + pattern + "' successfully matched the text."
		case m != nil:
			data.Explanation = "The regex pattern '" + pattern + "' matched the text, but 'not' is set, so the check fails."
		case !not:
			data.Explanation = "The regex pattern '" + pattern + "' did not match the text."
		default:
			data.Explanation = "The regex pattern '" + pattern + "' did not match the text, and 'not' is set, so the check passes."
		}
		return guardrails.Verdict{Pass: verdict, Data: data}, nil
	}), nil
}

// regexData is regexMatch's result data.
type regexData struct {
	RegexPattern string         `json:"regexPattern"`
	Not          bool           `json:"not"`
	Verdict      bool           `json:"verdict"`
	Explanation  string         `json:"explanation"`
	MatchDetails map[string]any `json:"matchDetails"`
	TextExcerpt  string         `json:"textExcerpt"`
}

// Check implements guardrails.Check.
func (c RegexMatch) Check(ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	return checkWith(c, ctx, in, params)
}

// RegexReplace (llm.checks.regexReplace) replaces matches of "rule" in the
// current text with "redactText" (default "[REDACTED]") and reports the
// change as a transformation. "rule" may be written "/pattern/flags": g
// replaces every match (otherwise only the first in each text part), i, m
// and s map to RE2 flags, u, y and d are accepted and ignored. The check
// passes unless "failOnDetection" is set and something matched.
type RegexReplace struct{}

// CaddyModule implements caddy.Module.
func (RegexReplace) CaddyModule() caddy.ModuleInfo {
	return info("regexReplace", func() caddy.Module { return new(RegexReplace) })
}

// parseJSRegex accepts "/pattern/flags" or a bare pattern.
func parseJSRegex(rule string) (re *regexp.Regexp, global bool, err error) {
	pattern, flags := rule, ""
	if len(rule) > 2 && rule[0] == '/' {
		if i := strings.LastIndexByte(rule, '/'); i > 0 {
			f := rule[i+1:]
			if strings.Trim(f, "gimsuyd") == "" {
				pattern, flags = rule[1:i], f
			}
		}
	}
	var inline string
	for _, f := range flags {
		switch f {
		case 'g':
			global = true
		case 'i', 'm', 's':
			inline += string(f)
		}
	}
	if inline != "" {
		pattern = "(?" + inline + ")" + pattern
	}
	re, err = compileRE2(pattern)
	return re, global, err
}

// Prepare compiles the rule.
func (RegexReplace) Prepare(params json.RawMessage) (guardrails.Check, error) {
	rule := gjson.GetBytes(params, "rule")
	if rule.Type != gjson.String || rule.Str == "" {
		return guardrails.CheckFunc(func(context.Context, *guardrails.Input, json.RawMessage) (guardrails.Verdict, error) {
			return guardrails.Verdict{}, errors.New("missing regex pattern")
		}), nil
	}
	re, global, err := parseJSRegex(rule.Str)
	if err != nil {
		return nil, err
	}
	redact := "[REDACTED]"
	if r := gjson.GetBytes(params, "redactText"); r.Type == gjson.String {
		redact = r.Str
	}
	failOnDetection := truthy(params, "failOnDetection")
	return guardrails.CheckFunc(func(_ context.Context, in *guardrails.Input, _ json.RawMessage) (guardrails.Verdict, error) {
		parts := guardrails.TextParts(in)
		texts := make([]string, len(parts))
		matches := 0
		for i, p := range parts {
			texts[i] = p.Text
			if global {
				n := len(re.FindAllStringIndex(p.Text, -1))
				if n > 0 {
					matches += n
					texts[i] = re.ReplaceAllLiteralString(p.Text, redact)
				}
			} else if loc := re.FindStringIndex(p.Text); loc != nil {
				matches++
				texts[i] = p.Text[:loc[0]] + redact + p.Text[loc[1]:]
			}
		}
		v := guardrails.Verdict{Pass: !(failOnDetection && matches > 0)}
		v.Data = map[string]any{"matchCount": matches, "regexPattern": rule.Str}
		if matches > 0 && in.Body() != nil {
			body, err := guardrails.SetTextParts(in.Body(), parts, texts)
			if err != nil {
				return v, err
			}
			v.Transformed, v.Body = true, body
		}
		return v, nil
	}), nil
}

// Check implements guardrails.Check.
func (c RegexReplace) Check(ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	return checkWith(c, ctx, in, params)
}

// Interface guards.
var (
	_ guardrails.Preparer = RegexMatch{}
	_ guardrails.Preparer = RegexReplace{}
)
