package checks

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

func TestRegexMatch(t *testing.T) {
	runCases(t, "regexMatch", []checkCase{
		{name: "match", in: before("call 555-1234 now"), params: `{"rule":"\\d{3}-\\d{4}"}`, pass: true},
		{name: "match with not", in: before("call 555-1234 now"), params: `{"rule":"\\d{3}-\\d{4}","not":true}`, pass: false},
		{name: "no match", in: before("nothing here"), params: `{"rule":"\\d+"}`, pass: false},
		{name: "no match with not", in: before("nothing here"), params: `{"rule":"\\d+","not":true}`, pass: true},
		{name: "after reads the answer", in: after("ERROR 42"), params: `{"rule":"^ERROR"}`, pass: true},
		{name: "missing rule", in: before("x"), params: `{}`, errSub: "missing regex pattern"},
		{name: "empty text", in: before(""), params: `{"rule":"x"}`, errSub: "missing text to match"},
		{name: "lookahead is not RE2", in: before("x"), params: `{"rule":"a(?=b)"}`, errSub: "RE2", prepare: true},
		{name: "backreference is not RE2", in: before("x"), params: `{"rule":"(a)\\1"}`, errSub: "rule:", prepare: true},
	})
}

func TestRegexMatchDetails(t *testing.T) {
	v, err := run(t, "regexMatch", before("héllo wörld 42"), `{"rule":"w(?P<v>ö)rld (\\d+)"}`)
	if err != nil {
		t.Fatal(err)
	}
	md := v.Data.(*regexData).MatchDetails
	if md["matchedText"] != "wörld 42" || md["index"] != 6 {
		t.Fatalf("matchDetails %v", md)
	}
	if caps := md["captures"].([]any); len(caps) != 2 || caps[0] != "ö" || caps[1] != "42" {
		t.Fatalf("captures %v", caps)
	}
	if g := md["groups"].(map[string]any); g["v"] != "ö" {
		t.Fatalf("groups %v", g)
	}
}

func TestSentenceCount(t *testing.T) {
	runCases(t, "sentenceCount", []checkCase{
		{name: "two sentences", in: before("A. B."), params: `{"minSentences":2,"maxSentences":2}`, pass: true},
		{name: "mixed terminators", in: before("Hi! Why? Ok."), params: `{"minSentences":1,"maxSentences":2}`, pass: false},
		{name: "not inverts", in: before("A. B."), params: `{"minSentences":2,"maxSentences":2,"not":true}`, pass: false},
		{name: "empty text counts zero", in: before(""), params: `{"minSentences":1,"maxSentences":5}`, pass: false},
		{name: "empty text in range zero", in: before(""), params: `{"minSentences":0,"maxSentences":5}`, pass: true},
		{name: "missing max", in: before("A."), params: `{"minSentences":1}`, errSub: "missing sentence count range"},
		{name: "string bound", in: before("A."), params: `{"minSentences":"1","maxSentences":3}`, errSub: "missing sentence count range"},
	})
}

func TestWordCount(t *testing.T) {
	runCases(t, "wordCount", []checkCase{
		{name: "seven words", in: before("This is a sentence with 7 words."), params: `{"minWords":7,"maxWords":7}`, pass: true},
		{name: "too many", in: before("one two three"), params: `{"minWords":1,"maxWords":2}`, pass: false},
		{name: "extra whitespace", in: before("  one \n\t two  "), params: `{"minWords":2,"maxWords":2}`, pass: true},
		{name: "not inverts", in: before("one two three"), params: `{"minWords":1,"maxWords":2,"not":true}`, pass: true},
		{name: "whitespace only", in: before("  \n "), params: `{"minWords":0,"maxWords":5}`, errSub: "missing text"},
		{name: "non-integer bound", in: before("a b"), params: `{"minWords":1.5,"maxWords":5}`, errSub: "invalid or missing word count range"},
		{name: "missing bounds", in: before("a b"), params: `{}`, errSub: "invalid or missing word count range"},
	})
}

func TestCharacterCount(t *testing.T) {
	runCases(t, "characterCount", []checkCase{
		{name: "whitespace counts", in: before("   \n\t   "), params: `{"minCharacters":1,"maxCharacters":10}`, pass: true},
		{name: "whitespace exact eight", in: before("   \n\t   "), params: `{"minCharacters":9,"maxCharacters":10}`, pass: false},
		{name: "emoji is two UTF-16 units", in: before("😀"), params: `{"minCharacters":2,"maxCharacters":2}`, pass: true},
		{name: "accented letter is one unit", in: before("é"), params: `{"minCharacters":1,"maxCharacters":1}`, pass: true},
		{name: "not inverts", in: before("abc"), params: `{"minCharacters":1,"maxCharacters":2,"not":true}`, pass: true},
		{name: "empty text", in: before(""), params: `{"minCharacters":0,"maxCharacters":2}`, errSub: "missing text"},
		{name: "non-integer", in: before("abc"), params: `{"minCharacters":0,"maxCharacters":2.5}`, errSub: "invalid or missing character count range"},
	})
}

func TestContains(t *testing.T) {
	runCases(t, "contains", []checkCase{
		{name: "any found", in: after("the quick fox"), params: `{"words":["fox","cat"],"operator":"any"}`, pass: true},
		{name: "any none found", in: after("the quick fox"), params: `{"words":["dog","cat"],"operator":"any"}`, pass: false},
		{name: "all found", in: after("the quick fox"), params: `{"words":["quick","fox"],"operator":"all"}`, pass: true},
		{name: "all missing one", in: after("the quick fox"), params: `{"words":["quick","cat"],"operator":"all"}`, pass: false},
		{name: "none", in: after("the quick fox"), params: `{"words":["cat"],"operator":"none"}`, pass: true},
		{name: "none but found", in: after("the quick fox"), params: `{"words":["fox"],"operator":"none"}`, pass: false},
		{name: "case sensitive", in: after("The Fox"), params: `{"words":["fox"],"operator":"any"}`, pass: false},
		{name: "empty list any", in: after("x"), params: `{"words":[],"operator":"any"}`, pass: false},
		{name: "empty list all", in: after("x"), params: `{"words":[],"operator":"all"}`, pass: true},
		{name: "empty list none", in: after("x"), params: `{"words":[],"operator":"none"}`, pass: true},
		{name: "unknown operator fails without error", in: after("fox"), params: `{"words":["fox"],"operator":"some"}`, pass: false},
		{name: "missing words", in: after("fox"), params: `{"operator":"any"}`, errSub: "words"},
	})
}

func TestEndsWith(t *testing.T) {
	runCases(t, "endsWith", []checkCase{
		{name: "ends", in: after("Hello world"), params: `{"suffix":"world"}`, pass: true},
		{name: "ends with suffix and dot", in: after("Hello world."), params: `{"suffix":"world"}`, pass: true},
		{name: "trailing space is not trimmed", in: after("Hello world "), params: `{"suffix":"world"}`, pass: false},
		{name: "not inverts", in: after("Hello world"), params: `{"suffix":"world","not":true}`, pass: false},
		{name: "empty suffix", in: after("x"), params: `{"suffix":""}`, errSub: "suffix"},
		{name: "empty text", in: after(""), params: `{"suffix":"x"}`, errSub: "missing text"},
	})
}

func TestCaseChecks(t *testing.T) {
	runCases(t, "alluppercase", []checkCase{
		{name: "upper", in: before("HELLO WORLD 42!"), params: `{}`, pass: true},
		{name: "mixed", in: before("Hello"), params: `{}`, pass: false},
		{name: "no letters", in: before("123 !@#$%"), params: `{}`, pass: true},
		{name: "non-ASCII letters ignored", in: before("ÉCOLE é"), params: `{}`, pass: true},
		{name: "not inverts", in: before("HELLO"), params: `{"not":true}`, pass: false},
		{name: "empty", in: before(""), params: `{}`, errSub: "missing text"},
	})
	runCases(t, "alllowercase", []checkCase{
		{name: "lower", in: before("hello world 42!"), params: `{}`, pass: true},
		{name: "mixed", in: before("hello World"), params: `{}`, pass: false},
		{name: "no letters", in: before("123 !@#$%"), params: `{}`, pass: true},
		{name: "not inverts", in: before("hello"), params: `{"not":true}`, pass: false},
		{name: "empty", in: before(""), params: `{}`, errSub: "missing text"},
	})
}

func TestContainsCode(t *testing.T) {
	py := "Here:\n```py\nprint(1)\n```\n"
	runCases(t, "containsCode", []checkCase{
		{name: "python by alias", in: after(py), params: `{"format":"Python"}`, pass: true},
		{name: "other language", in: after(py), params: `{"format":"SQL"}`, pass: false},
		{name: "not inverts", in: after(py), params: `{"format":"Python","not":true}`, pass: false},
		{name: "unknown tag compared raw", in: after("```zig\nconst x = 1;\n```"), params: `{"format":"zig"}`, pass: true},
		{name: "no blocks gives not=false", in: after("plain text"), params: `{"format":"Python"}`, pass: false},
		{name: "no blocks gives not=true", in: after("plain text"), params: `{"format":"Python","not":true}`, pass: true},
		{name: "missing format", in: after(py), params: `{}`, errSub: "format"},
		{name: "empty text", in: after(""), params: `{"format":"Python"}`, errSub: "no text content"},
	})
}

func TestNotNull(t *testing.T) {
	nullAnswer := &guardrails.Input{Stage: guardrails.AfterRequest, RequestType: "chatComplete",
		Response: []byte(`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}]}`), StatusCode: 200}
	emptyParts := &guardrails.Input{Stage: guardrails.AfterRequest, RequestType: "chatComplete",
		Response: []byte(`{"choices":[{"message":{"content":[{"type":"text","text":"  "}]}}]}`), StatusCode: 200}
	stream := func(s string) *guardrails.Input {
		return &guardrails.Input{Stage: guardrails.AfterRequest, RequestType: "stream-chatComplete", ResponseText: s, StatusCode: 200, Stream: true}
	}
	runCases(t, "notNull", []checkCase{
		{name: "content", in: after("hi"), params: `{}`, pass: true},
		{name: "null content", in: nullAnswer, params: `{}`, pass: false},
		{name: "blank string", in: after("   "), params: `{}`, pass: false},
		{name: "blank parts", in: emptyParts, params: `{}`, pass: false},
		{name: "not inverts", in: nullAnswer, params: `{"not":true}`, pass: true},
		{name: "stream with text", in: stream("hello"), params: `{}`, pass: true},
		{name: "empty stream", in: stream(""), params: `{}`, pass: false},
	})
}
