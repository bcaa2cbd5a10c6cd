package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// reference is the three-pass check scan replaced: a depth count, gjson's
// validation and utf8.Valid.
func reference(b []byte, limit int) error {
	if Depth(b, limit) > limit {
		return ErrTooDeep
	}
	if !gjson.ValidBytes(b) {
		return ErrInvalid
	}
	if !utf8.Valid(b) {
		return ErrInvalidUTF8
	}
	return nil
}

var scanCases = []struct {
	name string
	in   string
	want error
}{
	{"empty", ``, ErrInvalid},
	{"space only", "  \n", ErrInvalid},
	{"empty object", `{}`, nil},
	{"empty array with space", ` [ ] `, nil},
	{"scalars", `[true,false,null,0,-0,1.5e3,-2E-2,"s"]`, nil},
	{"nested", `{"a":[1,{"b":{"c":[[],{}]}}],"d":"e"}`, nil},
	{"long plain string", `{"k":"` + strings.Repeat("abcdefgh", 40) + `"}`, nil},
	{"escapes", `"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"`, nil},
	{"utf-8 text", `{"k":"héllo wörld 日本語 😀"}`, nil},
	{"trailing comma in array", `[1,]`, ErrInvalid},
	{"trailing comma in object", `{"a":1,}`, ErrInvalid},
	{"missing colon", `{"a" 1}`, ErrInvalid},
	{"unquoted key", `{a:1}`, ErrInvalid},
	{"two values", `{} {}`, ErrInvalid},
	{"unclosed", `{"a":[1`, ErrInvalid},
	{"mismatched", `[}`, ErrInvalid},
	{"leading zero", `01`, ErrInvalid},
	{"bare minus", `-`, ErrInvalid},
	{"dot without digits", `1.`, ErrInvalid},
	{"exponent without digits", `1e+`, ErrInvalid},
	{"bad literal", `tru`, ErrInvalid},
	{"bad escape", `"\x"`, ErrInvalid},
	{"short unicode escape", `"\u12"`, ErrInvalid},
	{"control byte in string", "\"a\x01b\"", ErrInvalid},
	{"raw newline in string", "\"a\nb\"", ErrInvalid},
	{"unterminated string", `"abcdefghijklmnop`, ErrInvalid},
	{"invalid utf-8 in string", "{\"a\":\"\xff\"}", ErrInvalidUTF8},
	{"truncated utf-8 in long string", "\"abcdefgh\xe6\x97\"", ErrInvalidUTF8},
	{"quote after 8 plain bytes", `"abcdefgh"`, nil},
	{"backslash at the end of a word", `"abcdefg\\"`, nil},
	// Strings past shortWords words take skipStr's run path.
	{"long string", `"` + long + `"`, nil},
	{"long string with escapes", `"` + long + `\n` + long + `\"` + long + `\u00e9\\"`, nil},
	{"long string ending in an escaped quote", `"` + long + `\""`, nil},
	{"long string, escaped quote then more", `["` + long + `\"", "` + long + `"]`, nil},
	{"long utf-8 string", `"` + long + `日本語😀` + long + `é"`, nil},
	{"long string with a control byte", "\"" + long + "\x1f" + long + "\"", ErrInvalid},
	{"long string with DEL", "\"" + long + "\x7f\"", nil},
	{"long string with invalid utf-8", "\"" + long + "\xc3\x28" + long + "\"", ErrInvalidUTF8},
	{"long string with a surrogate", "\"" + long + "\xed\xa0\x80\"", ErrInvalidUTF8},
	{"long string with utf-8 cut by the quote", "\"" + long + "\xe6\x97\"", ErrInvalidUTF8},
	{"long string, invalid utf-8 before a control byte", "\"" + long + "\xff\x01\"", ErrInvalidUTF8},
	{"long string, control byte before invalid utf-8", "\"" + long + "\x01\xff\"", ErrInvalid},
	{"long string, control byte after non-ASCII", "\"" + long + "é\x01" + long + "\"", ErrInvalid},
	{"long string, bad escape", `"` + long + `\x` + long + `"`, ErrInvalid},
	{"long string, short unicode escape", `"` + long + `\u12"`, ErrInvalid},
	{"long string, backslash at the end", `"` + long + `\`, ErrInvalid},
	{"long unterminated string", `"` + long, ErrInvalid},
	{"long unterminated string with invalid utf-8", "\"" + long + "\xff" + long, ErrInvalidUTF8},
	{"long unterminated string ending in an escaped quote", `"` + long + `\"`, ErrInvalid},
	{"short string, then an escape, then long", `"ab\n` + long + `"`, nil},
	{"short string with non-ASCII, then long", `"é` + long + `"`, nil},
	{"escape-dense string", `"` + strings.Repeat(`{\"a\":\"b\\n\"}`, 40) + `"`, nil},
}

// long is a plain run longer than shortWords words.
var long = strings.Repeat("abcdefghij", 7)

func TestScan(t *testing.T) {
	for _, tt := range scanCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := scan([]byte(tt.in), MaxDepth); !errors.Is(got, tt.want) {
				t.Fatalf("scan = %v, want %v", got, tt.want)
			}
			if old := oldScan([]byte(tt.in), MaxDepth); old != tt.want {
				t.Fatalf("the oracle says %v, want %v", old, tt.want)
			}
		})
	}
}

// TestScanAtEveryOffset moves each kind of fault (and each valid special
// byte) through every position of a string long enough for skipStr's run
// path, at every alignment, and requires the oracle's verdict: this is
// where the word loops, the run boundaries and the exact re-scan meet.
func TestScanAtEveryOffset(t *testing.T) {
	specials := []struct{ name, s string }{
		{"quote", `\"`},
		{"backslash", `\\`},
		{"newline escape", `\n`},
		{"unicode escape", `\u00e9`},
		{"bad escape", `\q`},
		{"control", "\x01"},
		{"tab", "\t"},
		{"DEL", "\x7f"},
		{"two-byte", "é"},
		{"four-byte", "😀"},
		{"bad lead", "\xff"},
		{"cut sequence", "\xe6\x97"},
		{"lone continuation", "\x80"},
		{"bare quote", `"`},
	}
	for _, sp := range specials {
		for n := 0; n < 80; n++ {
			for _, tail := range []string{`"`, ``, `\`, "x\"", long + `"`} {
				in := []byte(`["` + strings.Repeat("a", n) + sp.s + strings.Repeat("b", 80-n) + tail + `]`)
				if got, want := scan(in, MaxDepth), oldScan(in, MaxDepth); got != want {
					t.Fatalf("%s at %d, tail %q: scan = %v, oracle %v", sp.name, n, tail, got, want)
				}
			}
		}
	}
}

func TestScanDepthLimits(t *testing.T) {
	for _, limit := range []int{1, 8, MaxDepth, 300} {
		at := bytes.Repeat([]byte("["), limit)
		at = append(at, bytes.Repeat([]byte("]"), limit)...)
		if err := scan(at, limit); err != nil {
			t.Errorf("limit %d: nesting at the limit refused: %v", limit, err)
		}
		past := append([]byte("["), append(at, ']')...)
		if err := scan(past, limit); err != ErrTooDeep {
			t.Errorf("limit %d: one past the limit = %v", limit, err)
		}
	}
}

// FuzzScan checks that scan agrees with the three-pass check it replaced
// on validity, for any input within the depth limit whose member names
// scan does not refuse.
func FuzzScan(f *testing.F) {
	for _, tt := range scanCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := scan(b, 16), reference(b, 16)
		if strictErr(got) {
			return // names alone: FuzzStrict judges these
		}
		if (got == nil) != (want == nil) {
			t.Fatalf("scan(%q) = %v, reference %v", b, got, want)
		}
		if want == ErrTooDeep && got != ErrTooDeep && got != ErrInvalid {
			t.Fatalf("scan(%q) = %v for a too-deep document", b, got)
		}
	})
}

// FuzzScanOracle checks that scan returns exactly what the scan it
// replaced returns (the oracle in oracle_test.go), and that its verdict is
// encoding/json's with the limits: valid UTF-8, nested at most 16 levels
// (for documents whose member names scan does not refuse).
func FuzzScanOracle(f *testing.F) {
	for _, tt := range scanCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := scan(b, 16)
		if strictErr(got) {
			return // names alone: FuzzStrict judges these
		}
		if old := oldScan(b, 16); got != old {
			t.Fatalf("scan(%q) = %v, oracle %v", b, got, old)
		}
		want := json.Valid(b) && utf8.Valid(b) && Depth(b, 16) <= 16
		if (got == nil) != want {
			t.Fatalf("scan(%q) = %v, encoding/json with the limits says valid=%v", b, got, want)
		}
	})
}

// BenchmarkScan checks the documents every chat completion checks (a
// request and an answer) and large prompts of several kinds of text,
// with scan and with the scan it replaced (the oracle), so a change to
// either path shows against the other.
func BenchmarkScan(b *testing.B) {
	prose := strings.Repeat(`She said \"the quick brown fox jumps over the lazy dog\" and left.\n`, 2900)
	docs := []struct{ name, body string }{
		{"request", `{"model":"gpt-4o-mini","stream":false,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks."}]}`},
		{"answer", `{"id":"chatcmpl-mock-7201","object":"chat.completion","created":1795495301,"model":"gpt-4o-mini","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":" the quick brown fox jumps over a lazy dog while seven bright engineers measure every small delay between request and response the quick brown fox jumps over a lazy dog while seven bright engineers measure every small delay between request","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":40,"total_tokens":90}}`},
		// run.sh's PROMPT_BYTES=200000 request.
		{"200k-x", `{"model":"gpt-4o-mini","stream":false,"max_tokens":256,"messages":[{"role":"user","content":"` + strings.Repeat("x", 200000) + `"}]}`},
		{"200k-prose", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + prose + `"}]}`},
		{"200k-cjk", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("日本語のテキスト、", 7400) + `"}]}`},
		{"200k-json-in-json", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat(`{\"a\":[1,2],\"b\":\"c\"},`, 8000) + `"}]}`},
		{"200k-messages", `{"model":"gpt-4o-mini","messages":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"Write one short sentence about benchmarks."},`, 2800), ",") + `]}`},
	}
	for _, doc := range docs {
		for _, bench := range []struct {
			name  string
			check func([]byte) error
		}{
			{"scan", Check},
			{"oracle", func(b []byte) error { return oldScan(b, MaxDepth) }},
			{"three-pass", func(b []byte) error { return reference(b, MaxDepth) }},
		} {
			body := []byte(doc.body)
			if len(body) > 1000 && bench.name == "three-pass" {
				continue
			}
			b.Run(doc.name+"/"+bench.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if err := bench.check(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
