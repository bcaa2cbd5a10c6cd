package checks

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// SentenceCount (llm.checks.sentenceCount) passes when the number of
// sentence terminators (. ! ?) is within [minSentences, maxSentences];
// both must be numbers. Empty text counts 0.
type SentenceCount struct{}

// CaddyModule implements caddy.Module.
func (SentenceCount) CaddyModule() caddy.ModuleInfo {
	return info("sentenceCount", func() caddy.Module { return new(SentenceCount) })
}

// Check implements guardrails.Check.
func (SentenceCount) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	lo, ok1 := number(params, "minSentences")
	hi, ok2 := number(params, "maxSentences")
	if !ok1 || !ok2 {
		return guardrails.Verdict{}, errors.New("missing sentence count range")
	}
	not := truthy(params, "not")
	text := in.Text()
	count := strings.Count(text, ".") + strings.Count(text, "!") + strings.Count(text, "?")
	inRange := float64(count) >= lo && float64(count) <= hi
	verdict := invert(inRange, not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"sentenceCount": count, "minCount": lo, "maxCount": hi, "not": not, "verdict": verdict,
		"explanation": rangeExplanation("sentence count", count, lo, hi, inRange, not),
		"textExcerpt": excerpt(text),
	}}, nil
}

func rangeExplanation(what string, n int, lo, hi float64, inRange, not bool) string {
	rel := "within"
	if !inRange {
		rel = "outside"
	}
	s := "The " + what + " (" + strconv.Itoa(n) + ") is " + rel + " the range " +
		strconv.FormatFloat(lo, 'f', -1, 64) + "-" + strconv.FormatFloat(hi, 'f', -1, 64) + "."
	if not {
		s += " 'not' is set, so the result is inverted."
	}
	return s
}

// WordCount (llm.checks.wordCount) passes when the number of
// whitespace-separated words is within [minWords, maxWords] (integers).
// Empty or whitespace-only text is an error.
type WordCount struct{}

// CaddyModule implements caddy.Module.
func (WordCount) CaddyModule() caddy.ModuleInfo {
	return info("wordCount", func() caddy.Module { return new(WordCount) })
}

// Check implements guardrails.Check.
func (WordCount) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	text := in.Text()
	if strings.TrimSpace(text) == "" {
		return guardrails.Verdict{}, errors.New("missing text to analyze")
	}
	lo, ok1 := integer(params, "minWords")
	hi, ok2 := integer(params, "maxWords")
	if !ok1 || !ok2 {
		return guardrails.Verdict{}, errors.New("invalid or missing word count range")
	}
	not := truthy(params, "not")
	count := countWords(text)
	inRange := float64(count) >= lo && float64(count) <= hi
	verdict := invert(inRange, not)
	return guardrails.Verdict{Pass: verdict, Data: &wordCountData{
		WordCount: count, MinWords: lo, MaxWords: hi, Not: not, Verdict: verdict,
		Explanation: rangeExplanation("word count", count, lo, hi, inRange, not),
		TextExcerpt: excerpt(text),
	}}, nil
}

// wordCountData is wordCount's result data; a struct costs one allocation
// where a map costs many, and this check is on the hot path.
type wordCountData struct {
	WordCount   int     `json:"wordCount"`
	MinWords    float64 `json:"minWords"`
	MaxWords    float64 `json:"maxWords"`
	Not         bool    `json:"not"`
	Verdict     bool    `json:"verdict"`
	Explanation string  `json:"explanation"`
	TextExcerpt string  `json:"textExcerpt"`
}

// countWords is len(strings.Fields(s)) without building the slice.
func countWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// CharacterCount (llm.checks.characterCount) passes when the text's length
// in UTF-16 code units (JavaScript's length; not trimmed) is within
// [minCharacters, maxCharacters] (integers). Empty text is an error.
type CharacterCount struct{}

// CaddyModule implements caddy.Module.
func (CharacterCount) CaddyModule() caddy.ModuleInfo {
	return info("characterCount", func() caddy.Module { return new(CharacterCount) })
}

// Check implements guardrails.Check.
func (CharacterCount) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	text := in.Text()
	if text == "" {
		return guardrails.Verdict{}, errors.New("missing text to analyze")
	}
	lo, ok1 := integer(params, "minCharacters")
	hi, ok2 := integer(params, "maxCharacters")
	if !ok1 || !ok2 {
		return guardrails.Verdict{}, errors.New("invalid or missing character count range")
	}
	not := truthy(params, "not")
	count := utf16Len(text)
	inRange := float64(count) >= lo && float64(count) <= hi
	verdict := invert(inRange, not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"characterCount": count, "minCharacters": lo, "maxCharacters": hi, "not": not, "verdict": verdict,
		"explanation": rangeExplanation("character count", count, lo, hi, inRange, not),
		"textExcerpt": excerpt(text),
	}}, nil
}

// Contains (llm.checks.contains) looks for "words" (case-sensitive
// substrings) with "operator" any, all or none. An empty list passes for
// all and none and fails for any; an unknown operator fails without error.
type Contains struct{}

// CaddyModule implements caddy.Module.
func (Contains) CaddyModule() caddy.ModuleInfo {
	return info("contains", func() caddy.Module { return new(Contains) })
}

// Check implements guardrails.Check.
func (Contains) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	words, ok := stringList(gjson.GetBytes(params, "words"), false)
	if !ok {
		return guardrails.Verdict{}, errors.New("words: must be an array of strings")
	}
	op := gjson.GetBytes(params, "operator").Str
	text := in.Text()
	var found, missing []string
	for _, w := range words {
		if strings.Contains(text, w) {
			found = append(found, w)
		} else {
			missing = append(missing, w)
		}
	}
	var verdict bool
	switch op {
	case "any":
		verdict = len(found) > 0
	case "all":
		verdict = len(missing) == 0
	case "none":
		verdict = len(found) == 0
	}
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"operator": op, "foundWords": nonNil(found), "missingWords": nonNil(missing),
		"verdict": verdict, "textExcerpt": excerpt(text),
	}}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// EndsWith (llm.checks.endsWith) passes when the text ends with "suffix"
// or with suffix + "." (no trimming); "not" inverts.
type EndsWith struct{}

// CaddyModule implements caddy.Module.
func (EndsWith) CaddyModule() caddy.ModuleInfo {
	return info("endsWith", func() caddy.Module { return new(EndsWith) })
}

// Check implements guardrails.Check.
func (EndsWith) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	suffix := gjson.GetBytes(params, "suffix")
	if suffix.Type != gjson.String || suffix.Str == "" {
		return guardrails.Verdict{}, errors.New("missing or empty suffix")
	}
	text := in.Text()
	if text == "" {
		return guardrails.Verdict{}, errors.New("missing text to analyze")
	}
	not := truthy(params, "not")
	ends := strings.HasSuffix(text, suffix.Str) || strings.HasSuffix(text, suffix.Str+".")
	verdict := invert(ends, not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"suffix": suffix.Str, "not": not, "verdict": verdict, "textExcerpt": excerpt(text),
	}}, nil
}

// AllUppercase (llm.checks.alluppercase) passes when every ASCII letter
// of the text is upper case (text without letters passes); "not" inverts.
type AllUppercase struct{}

// CaddyModule implements caddy.Module.
func (AllUppercase) CaddyModule() caddy.ModuleInfo {
	return info("alluppercase", func() caddy.Module { return new(AllUppercase) })
}

// Check implements guardrails.Check.
func (AllUppercase) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	return caseCheck(in, params, 'a', 'z')
}

// AllLowercase (llm.checks.alllowercase) passes when every ASCII letter
// of the text is lower case (text without letters passes); "not" inverts.
type AllLowercase struct{}

// CaddyModule implements caddy.Module.
func (AllLowercase) CaddyModule() caddy.ModuleInfo {
	return info("alllowercase", func() caddy.Module { return new(AllLowercase) })
}

// Check implements guardrails.Check.
func (AllLowercase) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	return caseCheck(in, params, 'A', 'Z')
}

// caseCheck fails when any ASCII letter in [badLo, badHi] appears.
func caseCheck(in *guardrails.Input, params json.RawMessage, badLo, badHi byte) (guardrails.Verdict, error) {
	text := in.Text()
	if text == "" {
		return guardrails.Verdict{}, errors.New("missing text to analyze")
	}
	ok := true
	for i := 0; i < len(text); i++ {
		if text[i] >= badLo && text[i] <= badHi {
			ok = false
			break
		}
	}
	not := truthy(params, "not")
	verdict := invert(ok, not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{"not": not, "verdict": verdict, "textExcerpt": excerpt(text)}}, nil
}

// ContainsCode (llm.checks.containsCode) passes when a fenced code block
// of the given "format" (a display name: "Python", "SQL", "JavaScript", …)
// is in the text; "not" inverts. Text without fenced blocks gives the
// value of "not".
type ContainsCode struct{}

// CaddyModule implements caddy.Module.
func (ContainsCode) CaddyModule() caddy.ModuleInfo {
	return info("containsCode", func() caddy.Module { return new(ContainsCode) })
}

var codeBlock = regexp.MustCompile("```(\\w+)\\n[\\s\\S]*?\\n```")

var languages = map[string]string{
	"py": "Python", "python": "Python", "gyp": "Python",
	"js": "JavaScript", "javascript": "JavaScript", "jsx": "JavaScript",
	"ts": "TypeScript", "typescript": "TypeScript", "tsx": "TypeScript",
	"sql": "SQL", "java": "Java", "cs": "C#", "csharp": "C#", "cpp": "C++", "c": "C",
	"rb": "Ruby", "ruby": "Ruby", "php": "PHP", "swift": "Swift", "kt": "Kotlin", "kotlin": "Kotlin",
	"go": "Go", "rs": "Rust", "rust": "Rust", "scala": "Scala", "r": "R", "pl": "Perl", "perl": "Perl",
	"sh": "Shell", "bash": "Shell", "shell": "Shell", "html": "HTML", "css": "CSS", "xml": "XML",
	"json": "JSON", "yml": "YAML", "yaml": "YAML", "md": "Markdown", "markdown": "Markdown",
	"dockerfile": "Dockerfile",
}

// Check implements guardrails.Check.
func (ContainsCode) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	format := gjson.GetBytes(params, "format")
	if format.Type != gjson.String || format.Str == "" {
		return guardrails.Verdict{}, errors.New("missing required parameter: format")
	}
	text := in.Text()
	if text == "" {
		return guardrails.Verdict{}, errors.New("no text content to analyze")
	}
	not := truthy(params, "not")
	blocks := codeBlock.FindAllStringSubmatch(text, -1)
	if len(blocks) == 0 {
		return guardrails.Verdict{Pass: not, Data: map[string]any{
			"explanation": "No code blocks found in the text", "not": not, "verdict": not,
		}}, nil
	}
	var found []string
	has := false
	for _, b := range blocks {
		lang, ok := languages[strings.ToLower(b[1])]
		if !ok {
			lang = b[1]
		}
		found = append(found, lang)
		if lang == format.Str {
			has = true
		}
	}
	verdict := invert(has, not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"searchedFormat": format.Str, "foundFormats": found, "not": not, "verdict": verdict,
	}}, nil
}

// NotNull (llm.checks.notNull) passes when the answer has content: not
// null, not a blank string, not an empty array, not only blank text parts.
// A streamed answer is judged on its assembled text (the reference sees
// null there and always fails). "not" inverts.
type NotNull struct{}

// CaddyModule implements caddy.Module.
func (NotNull) CaddyModule() caddy.ModuleInfo {
	return info("notNull", func() caddy.Module { return new(NotNull) })
}

// Check implements guardrails.Check.
func (NotNull) Check(_ context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	isNull := true
	if in.Stage == guardrails.AfterRequest && in.Response == nil {
		isNull = strings.TrimSpace(in.ResponseText) == ""
	} else {
		for _, p := range guardrails.TextParts(in) {
			if strings.TrimSpace(p.Text) != "" {
				isNull = false
				break
			}
		}
	}
	not := truthy(params, "not")
	verdict := invert(!isNull, not)
	expl := "The response content is not null."
	if isNull {
		expl = "The response content is null, empty or blank."
	}
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{"explanation": expl, "not": not, "verdict": verdict}}, nil
}
