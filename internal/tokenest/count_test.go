package tokenest

import (
	"strings"
	"testing"
)

func TestCountString(t *testing.T) {
	// OpenAI's cookbook ("How to count tokens with tiktoken"): 6 tokens
	// in cl100k_base.
	if n := CountString("tiktoken is great!", Cl100k); n != 6 {
		t.Errorf("cl100k_base: %d tokens, want 6", n)
	}
	if n := CountString("hello world", O200k); n != 2 {
		t.Errorf("o200k_base: %d tokens, want 2", n)
	}
}

func TestEncodingFor(t *testing.T) {
	tests := []struct {
		model string
		want  Encoding
	}{
		{"gpt-4o", O200k}, {"gpt-4o-mini-2024-07-18", O200k}, {"gpt-4.1", O200k}, {"openai/gpt-4.1-mini", O200k},
		{"chatgpt-4o-latest", O200k}, {"gpt-5", O200k}, {"o3-mini", O200k},
		{"gpt-4", Cl100k}, {"gpt-4-turbo", Cl100k}, {"gpt-3.5-turbo", Cl100k}, {"gpt-35-turbo", Cl100k},
		{"text-embedding-3-small", Cl100k},
		{"claude-sonnet-4", O200k}, {"", O200k},
	}
	for _, tt := range tests {
		if got := EncodingFor(tt.model); got != tt.want {
			t.Errorf("EncodingFor(%q) = %s, want %s", tt.model, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	img := strings.Repeat("A", 40000) // a base64 image: not text
	tests := []struct {
		name string
		body string
		want int64
	}{
		// 3 (reply) + 3 (message) + 1 ("user") + 6.
		{"chat", `{"model":"gpt-4","messages":[{"role":"user","content":"tiktoken is great!"}]}`, 13},
		{"chat parts and image", `{"model":"gpt-4","messages":[{"role":"user","content":[{"type":"text","text":"tiktoken is great!"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}}]}]}`, 13},
		{"responses string", `{"model":"gpt-4","input":"tiktoken is great!"}`, 6},
		{"responses items and instructions", `{"model":"gpt-4","instructions":"tiktoken is great!","input":[{"role":"user","content":[{"type":"input_text","text":"tiktoken is great!"}]}]}`, 6 + 3 + 3 + 1 + 6},
		{"messages system blocks", `{"model":"claude","system":[{"type":"text","text":"tiktoken is great!","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}]}]}`, 6 + 3 + 3 + 1},
		{"completions token ids", `{"model":"gpt-4","prompt":[[1,2,3],[4,5]]}`, 3 + 5},
		{"completions string", `{"model":"gpt-4","prompt":"tiktoken is great!"}`, 6},
		{"no input", `{"model":"gpt-4","max_tokens":5}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count([]byte(tt.body), Cl100k, 0); got != tt.want {
				t.Errorf("Count = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCountTools(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":` + tools + `}`
	want := 3 + 3 + 1 + CountString("hi", O200k) + CountString(tools, O200k)
	if got := Count([]byte(body), O200k, 0); got != want {
		t.Errorf("Count = %d, want %d", got, want)
	}
}

// TestCountLimit: a count asked whether the input fits stops past the
// limit, reporting more than the limit.
func TestCountLimit(t *testing.T) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20000)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"` + long + `"}]}`)
	full := Count(body, O200k, 0)
	limited := Count(body, O200k, 1000)
	if limited <= 1000 || limited >= full/2 {
		t.Errorf("limited count %d (full %d): want just past 1000", limited, full)
	}
}

// TestCountBoundedByBytes: the bytes/1 bound that lets preflight skip the
// tokenizer (Fits) holds, escapes and framing included.
func TestCountBoundedByBytes(t *testing.T) {
	bodies := []string{
		`{"messages":[{},{},{},{}]}`,
		`{"messages":[{"role":"a","content":"b"}],"input":[{}],"prompt":[1,2,3]}`,
		`{"messages":[{"role":"user","content":"\n\n\n\n\u00e9\u00e9\ud83d\ude00 1 2 3 4 5 6 7 8 9"}]}`,
		`{"prompt":[[1],[2],[3]]}`,
		`{"contents":[{"parts":[{"text":"x"}]}],"systemInstruction":{"parts":[{"text":"y"}]}}`,
	}
	for _, b := range bodies {
		if n := Count([]byte(b), O200k, 0); n > int64(len(b)) {
			t.Errorf("%s: %d tokens above its %d bytes", b, n, len(b))
		}
	}
}

// TestCountChunks: a text longer than one tokenizer call counts about as
// the whole, cut on newlines and rune boundaries.
func TestCountChunks(t *testing.T) {
	for _, s := range []string{strings.Repeat("line of text\n", 12000), strings.Repeat("é", 100000)} {
		c := &counter{codec: codec(O200k)}
		c.text(s)
		whole := CountString(s, O200k)
		if d := c.n - whole; d < 0 || d > 8 {
			t.Errorf("chunked %d, whole %d", c.n, whole)
		}
	}
}

func BenchmarkCount(b *testing.B) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog, and then it said: hello. ", 9000)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + long + `"}]}`)
	codec(O200k)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Count(body, O200k, 0)
	}
}
