package jsonlimit

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var memberCases = []struct {
	name, doc, member string
	want              string
	found             bool
}{
	{"first", `{"model":"m","stream":true}`, "model", `"m"`, true},
	{"last", `{"model":"m","stream":true}`, "stream", `true`, true},
	{"absent", `{"model":"m","stream":true}`, "stream_options", ``, false},
	{"empty object", `{}`, "a", ``, false},
	{"spaces", " {\n \"a\" :\t[1, 2] ,\r\"b\" : null } ", "b", `null`, true},
	{"object value", `{"a":{"b":{"c":"}"}},"d":1}`, "a", `{"b":{"c":"}"}}`, true},
	{"array value", `{"a":[{"x":"]"},[]],"d":1}`, "a", `[{"x":"]"},[]]`, true},
	{"number before a brace", `{"a":-1.5e3}`, "a", `-1.5e3`, true},
	{"nested name does not count", `{"a":{"stream_options":1}}`, "stream_options", ``, false},
	{"name inside a string does not count", `{"a":"\"stream_options\":1"}`, "stream_options", ``, false},
	{"escaped quote then backslash", `{"a":"x\\\"y\\","b":2}`, "b", `2`, true},
	{"even backslashes before a quote", `{"a":"\\\\","b":2}`, "b", `2`, true},
	{"escaped name", `{"stream\u005foptions":{"include_usage":true}}`, "stream_options", `{"include_usage":true}`, true},
	{"escaped name, other text", `{"stream\u005fopts":1}`, "stream_options", ``, false},
	{"long string skipped", `{"messages":[{"content":"` + strings.Repeat(`ab\"c\\`, 100) + `"}],"n":3}`, "n", `3`, true},
	{"array document", `[{"a":1}]`, "a", ``, false},
	{"string document", `"{\"a\":1}"`, "a", ``, false},
}

func TestMember(t *testing.T) {
	for _, tt := range memberCases {
		t.Run(tt.name, func(t *testing.T) {
			if err := Check([]byte(tt.doc)); err != nil {
				t.Fatalf("case is not checked JSON: %v", err)
			}
			got, found := Member([]byte(tt.doc), tt.member)
			if string(got) != tt.want || found != tt.found {
				t.Fatalf("Member = %q, %v; want %q, %v", got, found, tt.want, tt.found)
			}
			// The answer gjson, which Member replaces, gives.
			if r := gjson.Get(tt.doc, tt.member); r.Raw != tt.want || r.Exists() != tt.found {
				t.Fatalf("gjson says %q, %v; the case wants %q, %v", r.Raw, r.Exists(), tt.want, tt.found)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	doc := []byte(`{"max_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}],"n":3}`)
	for _, tt := range []struct {
		names []string
		want  []string // "" for absent
	}{
		{[]string{"max_completion_tokens", "max_tokens", "max_output_tokens", "n"}, []string{"", "100", "", "3"}},
		{[]string{"n", "n"}, []string{"3", "3"}},
		{[]string{"absent"}, []string{""}},
		{nil, nil},
	} {
		values := make([][]byte, len(tt.names)+1)
		for i := range values {
			values[i] = []byte("stale")
		}
		Members(doc, tt.names, values)
		for i, name := range tt.names {
			if string(values[i]) != tt.want[i] || (values[i] == nil) != (tt.want[i] == "") {
				t.Errorf("Members(%q)[%s] = %q, want %q", tt.names, name, values[i], tt.want[i])
			}
		}
		if string(values[len(tt.names)]) != "stale" {
			t.Errorf("Members(%q) wrote past the names", tt.names)
		}
	}
}

// TestMemberUnchecked feeds Member broken documents: it may answer
// anything but must not read past its input.
func TestMemberUnchecked(t *testing.T) {
	for _, doc := range []string{``, `{`, `{"`, `{"a`, `{"a"`, `{"a":`, `{"a":"`, `{"a":"\`, `{"a":[`, `{"a":{"b":[`, `{"a":1`, `{"a":1,`, `{"a":1,"b`, `{"a\"":1`, `{"a":"\\\"`} {
		for _, name := range []string{"a", "b", "c"} {
			Member([]byte(doc), name)
		}
	}
}

// FuzzMember checks that Member answers as gjson.GetBytes does for every
// document that passes Check.
func FuzzMember(f *testing.F) {
	for _, tt := range memberCases {
		f.Add([]byte(tt.doc), tt.member)
	}
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		if Object(b) != nil || strings.ContainsAny(name, `.*?|#@\!=<>%~`) || name == "" || !utf8String(name) {
			Member(b, name)
			return
		}
		got, found := Member(b, name)
		r := gjson.GetBytes(b, name)
		if found != r.Exists() || (found && string(got) != r.Raw) {
			t.Fatalf("Member(%q, %q) = %q, %v; gjson %q, %v", b, name, got, found, r.Raw, r.Exists())
		}
		names := []string{"model", name, "n"}
		values := make([][]byte, len(names))
		Members(b, names, values)
		for i, n := range names {
			if r := gjson.GetBytes(b, n); string(values[i]) != r.Raw || (values[i] != nil) != r.Exists() {
				t.Fatalf("Members(%q)[%q] = %q; gjson %q, %v", b, n, values[i], r.Raw, r.Exists())
			}
		}
	})
}

func utf8String(s string) bool { return CheckString(`"`+s+`"`) == nil && !strings.ContainsAny(s, `"`) }

// BenchmarkMember asks the 200 KB chat request of the bench harness for
// the rate limiter's estimate fields, a member it lacks (stream_options,
// asked on every stream) and one it has (model), with Member(s) and with
// gjson.
func BenchmarkMember(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks. ` + strings.Repeat("x", 200000) + `"}]}`)
	// The four members the rate limiter's token estimate reads.
	names := []string{"max_completion_tokens", "max_tokens", "max_output_tokens", "n"}
	b.Run("estimate/members", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		values := make([][]byte, len(names))
		for b.Loop() {
			Members(body, names, values)
		}
	})
	b.Run("estimate/gjson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			gjson.GetManyBytes(body, names...)
		}
	})
	for _, name := range []string{"stream_options", "model"} {
		b.Run(name+"/member", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				Member(body, name)
			}
		})
		b.Run(name+"/gjson", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				gjson.GetBytes(body, name)
			}
		})
	}
}
