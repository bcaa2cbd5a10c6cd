package messages

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// usualChunks are chunks in the shapes providers send, which scanChunk
// must take itself rather than leave to the gjson walk.
var usualChunks = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a1b2"}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":20,"total_tokens":39,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	// Escapes: quotes, new lines, \u escapes, a surrogate pair.
	`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":"a \"quote\"\n\tnext\\line \u00e9\u4e2d \ud83d\ude00 \/"},"finish_reason":null}]}`,
	// Raw UTF-8 and control characters in a string without escapes.
	"{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\u00e9llo \xe4\xb8\xad \x01\"}}]}",
	// Reasoning (DeepSeek, vLLM), stop sequences (vLLM, SGLang).
	`{"id":"c","model":"m","choices":[{"index":0,"delta":{"reasoning_content":"Think","content":null}}]}`,
	`{"id":"c","model":"m","choices":[{"index":0,"delta":{"reasoning":"Think","reasoning_content":""}}]}`,
	`{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"END"}]}`,
	`{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop","matched_stop":2,"stop_reason":null}]}`,
	// Azure's content filter results, white space, members in another order.
	`{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"x"},"finish_reason":null,"index":0,"logprobs":null}],"created":1,"id":"c","model":"m","object":"chat.completion.chunk","system_fingerprint":null,"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`,
	" { \"id\" : \"c\" ,\n\t\"choices\" : [ { \"delta\" : { \"content\" : \"x\" } } ] , \"n\":-1.5e+3 } ",
	`{"id":null,"model":null,"choices":[{"delta":null,"finish_reason":"length"}],"usage":7}`,
	`{}`,
	`{"choices":[{}]}`,
	`{"choices":[{"delta":{"content":"x","tool_calls":null}}]}`,
	// Tool calls: OpenAI's first fragment of a call and the ones after
	// it, parallel calls in one chunk, no index, an empty list.
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{}"}},{"index":1,"id":"call_2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]}}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":12,"id":null,"function":null}]}}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f","arguments":null,"extra":{"k":[1]}}}]}}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[]}}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
}

// leftChunks are chunks scanChunk leaves to the gjson walk.
var leftChunks = []string{
	`{"error":{"message":"boom"}}`,
	`{"id":"c","choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":"1","function":{"arguments":"x"}}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":1.0,"function":{"arguments":"x"}}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":-1,"function":{"arguments":"x"}}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":1234567890,"function":{"arguments":"x"}}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","name":"g"}}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"function":"f"}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"id":7}]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[1]}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":{"index":0}}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[],"tool_calls":null}}]}`,
	`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0},{"index":1},{"index":2},{"index":3},{"index":4}]}}]}`,
	`{"id":"c","id":"d","choices":[]}`,
	`{"id":"c","choices":[{"delta":{"content":"a","content":"b"}}]}`,
	`{"id":"c","choices":[{"delta":{"content":"a"},"delta":{}}]}`,
	`{"mod\u0065l":"m","choices":[]}`,
	`{"id":1,"choices":[]}`,
	`{"id":"c","choices":[{"delta":{"content":1}}]}`,
	`{"id":"c","choices":[{"delta":{"content":"bad \x escape"}}]}`,
	`{"id":"c","choices":[{"delta":{"content":"bad \u12 escape"}}]}`,
	"{\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"raw\x01control \\n\"}}]}",
	`{"id":"c","choices":[{"delta":{"content":"x"}}]} trailing`,
	`{"id":"c","choices":[{"delta":{"content":"x"}}]`,
	`{"id":"c",}`,
	`{"id":"c","n":01}`,
	`{"id":"c","n":1.}`,
	`{"id":"c","n":nul}`,
	`{"id":"c","n":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}`,
	`[{"id":"c"}]`,
	`"text"`,
}

// readBoth reads one chunk with scanChunk and with the gjson walk.
func readBoth(t testing.TB, chunk []byte) (fast, walk chunkView, scanned, walked bool) {
	t.Helper()
	data := bytes.TrimSpace(chunk)
	var r chunkScan
	scanned = r.scan(data, &fast)
	s := NewStreamWriter(io.Discard, "m", nil)
	walked = s.gjsonChunk(data, &walk)
	return fast, walk, scanned, walked
}

// sameView reports whether scanChunk's reading of a chunk (fast) says
// what the gjson walk's (walk) does.
func sameView(fast, walk chunkView) bool {
	// The writer takes the walk's tool calls from an array only.
	var calls []toolCall
	if walk.tools.IsArray() {
		walk.tools.ForEach(func(_, v gjson.Result) bool {
			calls = append(calls, toolCallOf(v))
			return true
		})
	}
	return fast.id == walk.id && fast.model == walk.model && fast.hasUsage == walk.hasUsage && bytes.Equal(fast.usage, walk.usage) &&
		fast.choice == walk.choice && fast.content == walk.content && fast.reasoning == walk.reasoning &&
		fast.finish == walk.finish && fast.matched == walk.matched && !fast.tools.Exists() &&
		slices.Equal(fast.calls[:fast.ncalls], calls)
}

func TestChunkScanTakesUsualChunks(t *testing.T) {
	for _, c := range usualChunks {
		fast, walk, scanned, walked := readBoth(t, []byte(c))
		if !scanned {
			t.Errorf("left to gjson: %s", c)
			continue
		}
		if !walked || !sameView(fast, walk) {
			t.Errorf("%s:\nscan %+v\nwalk %+v", c, fast, walk)
		}
	}
}

func TestChunkScanLeavesOthersToGJSON(t *testing.T) {
	for _, c := range leftChunks {
		if _, _, scanned, _ := readBoth(t, []byte(c)); scanned {
			t.Errorf("scanned: %s", c)
		}
	}
}

// TestStreamWriterScanMatchesGJSON: a stream of every chunk above is
// written byte for byte as the gjson walk alone writes it, whole and
// cut into pieces.
func TestStreamWriterScanMatchesGJSON(t *testing.T) {
	all := append(append([]string{}, usualChunks...), leftChunks...)
	for i := range all {
		// Each chunk after a usual start, then the stream's end.
		in := chatSSE(usualChunks[0], all[i], usualChunks[3], usualChunks[4], `[DONE]`)
		for _, step := range []int{len(in), 1, 13} {
			fast, walk := writeStream(in, step, false), writeStream(in, step, true)
			if fast != walk {
				t.Fatalf("chunk %d, step %d:\nscan %q\nwalk %q", i, step, fast, walk)
			}
		}
	}
}

// randomID is an id the writer makes up for a chunk or tool call
// without one.
var randomID = regexp.MustCompile(`"(msg_|toolu_)[0-9a-f]{24}"`)

// writeStream writes in through a StreamWriter in pieces of step bytes;
// the ids it made up read "random".
func writeStream(in string, step int, gjsonOnly bool) string {
	var out bytes.Buffer
	s := NewStreamWriter(&out, "claude-x", []string{"END"})
	s.gjsonOnly = gjsonOnly
	for b := []byte(in); len(b) > 0; {
		n := min(step, len(b))
		_, _ = s.Write(b[:n])
		b = b[n:]
	}
	_ = s.Close(nil)
	return randomID.ReplaceAllString(out.String(), `"random"`)
}

// FuzzChunkScan: whatever a chunk holds, scanChunk either leaves it to
// the gjson walk or reads what the walk reads, and a stream of it is
// written byte for byte as the walk alone writes it.
func FuzzChunkScan(f *testing.F) {
	for _, c := range append(append([]string{}, usualChunks...), leftChunks...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, chunk []byte) {
		fast, walk, scanned, walked := readBoth(t, chunk)
		if scanned && (!walked || !sameView(fast, walk)) {
			t.Fatalf("%q:\nscan %+v\nwalk %+v", chunk, fast, walk)
		}
		if bytes.ContainsAny(chunk, "\r\n") {
			return // not one SSE data line
		}
		in := chatSSE(string(chunk), usualChunks[5], string(chunk), `[DONE]`)
		if a, b := writeStream(in, len(in), false), writeStream(in, len(in), true); a != b {
			t.Fatalf("%q:\nscan %q\nwalk %q", chunk, a, b)
		}
	})
}

// TestChunkScanEscapesMatchGJSON: 10,000 chunks whose strings mix every
// kind of escape (surrogate pairs, lone and mismatched surrogates, \u of
// control and line separator characters), raw and invalid UTF-8, control
// bytes and brackets are read by scanChunk as gjson reads them, in every
// member the writer reads (tool calls' too) and in members it skips.
func TestChunkScanEscapesMatchGJSON(t *testing.T) {
	pieces := []string{
		"a", " ", "é", "中", "\xff", "\xe4\xb8", "\x01", "\t",
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
		`\u0041`, `\u00e9`, `\u4E2D`, `\u0000`, `\u001f`, `\u2028`, `\u2029`, `\ufffd`,
		`\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83d\u0041`, `\udc00\ud800`, `\ud83d\ud83d`,
		"(", ")", "[", "]", "{", "}", `\\\"`, ",", ":",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		for n := rng.IntN(6); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	scannedN := 0
	for i := 0; i < 10000; i++ {
		// Skipped members too, nested ones among them (gjson steps
		// over those by counting brackets outside strings).
		chunk := fmt.Sprintf(`{"id":"%s","system_fingerprint":"%s","model":"%s","choices":[{"index":0,"content_filter_results":{"a":["%s",{"b":"%s"}]},"delta":{"reasoning_content":"%s","content":"%s"},"finish_reason":"%s","stop_reason":"%s"}]}`,
			str(), str(), str(), str(), str(), str(), str(), str(), str())
		if i%2 == 1 {
			chunk = fmt.Sprintf(`{"id":"%s","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"%s","type":"%s","function":{"name":"%s","arguments":"%s"}}]}}]}`,
				str(), i%3, str(), str(), str(), str())
		}
		fast, walk, scanned, walked := readBoth(t, []byte(chunk))
		if scanned && (!walked || !sameView(fast, walk)) {
			t.Fatalf("%q:\nscan %+v\nwalk %+v", chunk, fast, walk)
		}
		if scanned {
			scannedN++
		}
		in := chatSSE(chunk, usualChunks[5], `[DONE]`)
		if a, b := writeStream(in, len(in), false), writeStream(in, len(in), true); a != b {
			t.Fatalf("%q:\nscan %q\nwalk %q", chunk, a, b)
		}
	}
	// Most strings hold no raw control byte before an escape, and
	// those are the scanner's.
	if scannedN < 3000 {
		t.Fatalf("only %d of 10000 chunks scanned", scannedN)
	}
	t.Logf("%d of 10000 chunks scanned", scannedN)
}
