package jsonlimit

import (
	"bytes"
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
}

func TestScan(t *testing.T) {
	for _, tt := range scanCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := scan([]byte(tt.in), MaxDepth); !errors.Is(got, tt.want) {
				t.Fatalf("scan = %v, want %v", got, tt.want)
			}
		})
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
// on validity, for any input within the depth limit.
func FuzzScan(f *testing.F) {
	for _, tt := range scanCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := scan(b, 16), reference(b, 16)
		if (got == nil) != (want == nil) {
			t.Fatalf("scan(%q) = %v, reference %v", b, got, want)
		}
		if want == ErrTooDeep && got != ErrTooDeep && got != ErrInvalid {
			t.Fatalf("scan(%q) = %v for a too-deep document", b, got)
		}
	})
}

// BenchmarkScan checks a chat request and a chat answer, the two
// documents every chat completion checks.
func BenchmarkScan(b *testing.B) {
	docs := []struct{ name, body string }{
		{"request", `{"model":"gpt-4o-mini","stream":false,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks."}]}`},
		{"answer", `{"id":"chatcmpl-mock-7201","object":"chat.completion","created":1795495301,"model":"gpt-4o-mini","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":" the quick brown fox jumps over a lazy dog while seven bright engineers measure every small delay between request and response the quick brown fox jumps over a lazy dog while seven bright engineers measure every small delay between request","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":40,"total_tokens":90}}`},
	}
	for _, doc := range docs {
		for _, bench := range []struct {
			name  string
			check func([]byte) error
		}{
			{"scan", Check},
			{"three-pass", func(b []byte) error { return reference(b, MaxDepth) }},
		} {
			body := []byte(doc.body)
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
