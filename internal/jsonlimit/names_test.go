package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// strictCases are documents scan must refuse (or accept) for their
// member names alone: each is otherwise valid JSON.
var strictCases = []struct {
	name string
	in   string
	// path is the DuplicateError's path; "" when the document passes.
	path string
	// surrogate is set when the name holds an unpaired surrogate.
	surrogate bool
}{
	{"distinct names", `{"model":"a","stream":true}`, "", false},
	{"same name in sibling objects", `[{"a":1},{"a":2}]`, "", false},
	{"same name at two depths", `{"a":{"a":{"a":1}}}`, "", false},
	{"same name after a nested object closes", `{"a":{"b":1},"b":2}`, "", false},
	{"depth 1", `{"model":"gpt-4o-mini","model":"o3"}`, "model", false},
	{"depth 1, apart", `{"model":"a","messages":[],"stream":false,"model":"b"}`, "model", false},
	{"depth 2", `{"metadata":{"k":"1","k":"2"}}`, "metadata.k", false},
	{"depth 3 in an array", `{"messages":[{"role":"user","content":"x"},{"role":"user","role":"system"}]}`, "messages[1].role", false},
	{"depth 3 in nested objects", `{"a":{"b":{"c":1,"c":2}}}`, "a.b.c", false},
	{"in a top-level array", `[1,{"x":1,"x":1}]`, "[1].x", false},
	{"escaped duplicate", `{"model":"a","mod\u0065l":"b"}`, "model", false},
	{"escaped first", `{"m\u006fdel":"a","model":"b"}`, "model", false},
	{"same name, different escapes", `{"\u006dodel":"a","mo\u0064el":"b"}`, "model", false},
	{"upper-case hex escape", `{"model":"a","mod\u0045l":"b"}`, "", false},
	{"short escapes", `{"a\/b":1,"a/b":2}`, "a/b", false},
	{"escaped quote and backslash", `{"a\"\\":1,"a\u0022\u005c":2}`, "a\"\\", false},
	{"unicode escape of non-ASCII", `{"é":1,"\u00e9":2}`, "é", false},
	{"surrogate pair", `{"😀":1,"\ud83d\ude00":2}`, "😀", false},
	{"surrogate pair, upper case", `{"\uD83D\uDE00":1,"\ud83d\ude00":2}`, "😀", false},
	{"distinct surrogate pairs", `{"\ud83d\ude00":1,"\ud83d\ude01":2}`, "", false},
	{"lone high surrogate", `{"\ud800":1}`, "", true},
	{"lone low surrogate", `{"a\udc00b":1}`, "", true},
	{"reversed pair", `{"\udc00\ud800":1}`, "", true},
	{"high surrogate then a letter", `{"\ud800\u0041":1}`, "", true},
	{"lone surrogate in a value is text", `{"a":"\ud800"}`, "", false},
	{"names that differ only in case", `{"model":"a","Model":"b"}`, "", false},
	{"raw bytes equal, string values", `{"a":"a","b":"a"}`, "", false},
}

func TestScanStrict(t *testing.T) {
	for _, tt := range strictCases {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.in)) {
				t.Fatalf("case is not valid JSON")
			}
			err := Check([]byte(tt.in))
			switch {
			case tt.surrogate:
				if err != ErrSurrogateName {
					t.Fatalf("Check = %v, want ErrSurrogateName", err)
				}
			case tt.path == "":
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
			default:
				d, ok := AsDuplicate(err)
				if !ok || d.Path != tt.path {
					t.Fatalf("Check = %v, want a duplicate at %q", err, tt.path)
				}
				if !strings.Contains(d.Error(), strconv.Quote(tt.path)) {
					t.Fatalf("message %q does not name %q", d.Error(), tt.path)
				}
				// The reference reading (encoding/json's tokens) finds
				// the same member.
				if p, dup := refDuplicate([]byte(tt.in)); !dup || p != tt.path {
					t.Fatalf("encoding/json finds %q (%v)", p, dup)
				}
			}
		})
	}
}

// TestScanManyMembers takes objects past bigObject, where names move to
// a map: a repeat is found wherever it is, and many distinct names pass.
func TestScanManyMembers(t *testing.T) {
	obj := func(n int, extra string) []byte {
		var b bytes.Buffer
		b.WriteString(`{"outer":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":{"k0":1}`)
		}
		b.WriteString(extra + `},"k1":2}`)
		return b.Bytes()
	}
	for _, n := range []int{bigObject - 1, bigObject, bigObject + 1, 1000} {
		if err := Check(obj(n, "")); err != nil {
			t.Errorf("%d distinct names: %v", n, err)
		}
		for _, dup := range []int{0, n / 2, n - 1} {
			err := Check(obj(n, `,"k`+strconv.Itoa(dup)+`":0`))
			if d, ok := AsDuplicate(err); !ok || d.Path != "outer.k"+strconv.Itoa(dup) {
				t.Errorf("%d names, k%d again: %v", n, dup, err)
			}
			err = Check(obj(n, `,"\u006b`+strconv.Itoa(dup)+`":0`))
			if d, ok := AsDuplicate(err); !ok || d.Path != "outer.k"+strconv.Itoa(dup) {
				t.Errorf("%d names, k%d escaped again: %v", n, dup, err)
			}
		}
	}
}

// TestStrictAfterSyntax: names are judged in a document that is
// otherwise JSON; a fault of syntax anywhere wins, so a caller told of a
// repeat may read the rest of the document.
func TestStrictAfterSyntax(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string // "" for ErrInvalid
	}{
		{`{"a":1,"a":2,}`, ""},
		{`{"a":1,"a":2,"b":[1,]}`, ""},
		{`{"\ud800":1,`, ""},
		{`{"a":1,"a":2,"b":3,"b":4}`, "a"},
		{`{"b":{"x":1,"x":2},"a":1,"a":2}`, "b.x"},
	} {
		err := Check([]byte(tt.in))
		if d, ok := AsDuplicate(err); tt.want == "" && err != ErrInvalid || tt.want != "" && (!ok || d.Path != tt.want) {
			t.Errorf("Check(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestDuplicatePathBounded(t *testing.T) {
	name := strings.Repeat("é", 400)
	err := Check([]byte(`{"` + name + `":1,"` + name + `":2}`))
	d, ok := AsDuplicate(err)
	if !ok || len(d.Path) > maxPath || !strings.HasPrefix(name, d.Path) {
		t.Fatalf("Check = %v", err)
	}
}

func TestString(t *testing.T) {
	for _, raw := range []string{`"gpt-4o"`, `"o\u0033"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud83d\ude00 \"x\" \\ \/ \b\f\n\r\t"`, `""`} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := String([]byte(raw)); !ok || got != want {
			t.Errorf("String(%s) = %q, %v; encoding/json %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`1`, `null`, `{"a":1}`, `"`} {
		if _, ok := String([]byte(raw)); ok {
			t.Errorf("String(%s) says it is a string", raw)
		}
	}
}

// refDuplicate is the reference reading of member names: encoding/json's
// tokens (names decoded its way), a set per object. It returns the path
// of the first repeated member.
func refDuplicate(b []byte) (string, bool) {
	type frame struct {
		object, wantKey bool
		index           int
		key             string
		seen            map[string]bool
	}
	var st []*frame
	valueDone := func() {
		if len(st) == 0 {
			return
		}
		if f := st[len(st)-1]; f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return "", false
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			st = st[:len(st)-1]
			valueDone()
			continue
		}
		if len(st) > 0 && st[len(st)-1].object && st[len(st)-1].wantKey {
			f := st[len(st)-1]
			key := tok.(string)
			if f.seen[key] {
				var p []string
				for _, g := range st[:len(st)-1] {
					if g.object {
						p = append(p, "."+g.key)
					} else {
						p = append(p, "["+strconv.Itoa(g.index)+"]")
					}
				}
				return strings.TrimPrefix(strings.Join(p, "")+"."+key, "."), true
			}
			f.seen[key], f.key, f.wantKey = true, key, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			st = append(st, &frame{object: true, wantKey: true, seen: map[string]bool{}})
		case json.Delim('['):
			st = append(st, &frame{})
		default:
			valueDone()
		}
	}
}

// strictErr reports whether err is one of the refusals of names alone.
func strictErr(err error) bool {
	_, dup := AsDuplicate(err)
	return dup || errors.Is(err, ErrSurrogateName)
}

// hasSurrogateEscape reports whether b may hold a surrogate escape.
func hasSurrogateEscape(b []byte) bool {
	l := bytes.ToLower(b)
	return bytes.Contains(l, []byte(`\ud8`)) || bytes.Contains(l, []byte(`\ud9`)) || bytes.Contains(l, []byte(`\uda`)) || bytes.Contains(l, []byte(`\udb`)) ||
		bytes.Contains(l, []byte(`\udc`)) || bytes.Contains(l, []byte(`\udd`)) || bytes.Contains(l, []byte(`\ude`)) || bytes.Contains(l, []byte(`\udf`))
}

// FuzzStrict checks scan's verdict on member names against the
// reference reading (refDuplicate), and that on every document scan
// accepts, the model Member and String read is the model encoding/json
// reads: last-wins, as a provider reads it, which can only agree with
// the gateway's first-wins reading when no name repeats.
func FuzzStrict(f *testing.F) {
	for _, tt := range strictCases {
		f.Add([]byte(tt.in))
	}
	for _, tt := range scanCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"m\u006fdel":"o3"}`))
	f.Add([]byte(`{"model":"o\u0033","n":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := scan(b, 16)
		old := oldScan(b, 16)
		refPath, refDup := "", false
		if old == nil {
			refPath, refDup = refDuplicate(b)
		}
		switch {
		case !strictErr(got):
			if got != old {
				t.Fatalf("scan(%q) = %v, oracle %v", b, got, old)
			}
			if refDup {
				t.Fatalf("scan(%q) accepted a repeat of %q", b, refPath)
			}
		case old != nil:
			t.Fatalf("scan(%q) = %v for a document the oracle refuses: %v", b, got, old)
		case errors.Is(got, ErrSurrogateName):
			if !hasSurrogateEscape(b) {
				t.Fatalf("scan(%q) = %v without a surrogate escape", b, got)
			}
		default:
			d, _ := AsDuplicate(got)
			if !refDup && !hasSurrogateEscape(b) {
				t.Fatalf("scan(%q) = %v; encoding/json finds no repeat", b, got)
			}
			if refDup && d.Path != refPath && !hasSurrogateEscape(b) && len(refPath) <= maxPath {
				t.Fatalf("scan(%q) = %v; encoding/json finds %q", b, got, refPath)
			}
		}
		if got != nil || Object(b) != nil {
			return
		}
		var last map[string]any
		if err := json.Unmarshal(b, &last); err != nil {
			t.Fatalf("encoding/json refuses %q, which scan accepts: %v", b, err)
		}
		raw, found := Member(b, "model")
		want, isString := last["model"].(string)
		if _, present := last["model"]; present != found {
			t.Fatalf("Member(%q, model) found=%v; encoding/json %v", b, found, present)
		}
		if got, ok := String(raw); isString && (!ok || got != want) {
			t.Fatalf("model of %q: gateway %q, encoding/json %q", b, got, want)
		}
	})
}

func TestHasName(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		fold bool
		want bool
	}{
		{`{"custom_host":"x"}`, false, true},
		{`{"custom\u005fhost":"x"}`, false, true},
		{`{"targets":[{"a":1},{"b":{"custom_host":"x"}}]}`, false, true},
		{`{"Custom_Host":"x"}`, false, false},
		{`{"Custom_Host":"x"}`, true, true},
		{`{"CUSTOM\u005FHOST":"x"}`, true, true},
		{`{"a":"custom_host"}`, true, false},
		{`{"a":["custom_host","b"]}`, true, false},
		{`["custom_host"]`, true, false},
		{`{"a":"\"custom_host\":1"}`, true, false},
		{`{"custom_hosts":1}`, true, false},
	} {
		if err := Check([]byte(tt.doc)); err != nil {
			t.Fatalf("%s: %v", tt.doc, err)
		}
		if got := HasName([]byte(tt.doc), "custom_host", tt.fold); got != tt.want {
			t.Errorf("HasName(%s, fold=%v) = %v", tt.doc, tt.fold, got)
		}
	}
}
