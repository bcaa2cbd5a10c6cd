package tokenest

import (
	"strings"
	"sync"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"
)

// Counting a request's input tokens with OpenAI's tokenizers (BPE, the
// vocabularies compiled into the binary by github.com/tiktoken-go/tokenizer,
// so nothing is downloaded at run time). The count is what token preflight
// compares with a model's context window and what the gateway answers to a
// token-count call no provider counts.
//
// What is counted: the text of the members that make up a model's input —
// messages (chat, Messages), input and instructions (Responses), system,
// prompt (completions; token arrays count their elements), tools and
// functions (their JSON text), Gemini's contents and systemInstruction —
// every string value in them except media and framing (image, audio and
// file payloads, URLs, ids of uploaded files, part types, cache controls),
// plus 3 tokens per message and 3 for the reply's start, as OpenAI's own
// accounting has it. Images, audio and files count nothing, so for a
// multimodal request the count is below what the provider bills.
//
// For OpenAI-family models (gpt-4o, gpt-4.1, gpt-5, o-series: o200k_base;
// gpt-4, gpt-3.5 and the embedding models: cl100k_base) the text's count
// is the tokenizer's. Other providers' models use other tokenizers; they
// are counted with o200k_base as an estimate (Claude's and Gemini's
// tokenizers give a similar or larger count for English text), so a
// target is skipped only when its window is clearly exceeded.

// Encoding names a BPE vocabulary.
type Encoding = tokenizer.Encoding

// The vocabularies Count uses.
const (
	O200k  Encoding = tokenizer.O200kBase
	Cl100k Encoding = tokenizer.Cl100kBase
)

// EncodingFor returns the vocabulary of model: cl100k_base for gpt-4,
// gpt-3.5 and the text-embedding models, o200k_base for everything else
// (OpenAI's current models, and the estimate for other providers').
func EncodingFor(model string) Encoding {
	m := model
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4."), strings.HasPrefix(m, "chatgpt-"):
		return O200k
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-"):
		return Cl100k
	}
	return O200k
}

// codecs are the vocabularies, built on first use: each is a map of some
// 100,000 or 200,000 entries (about 60 ms and tens of MB), which most
// processes never need, since most requests are far below every window.
var codecs sync.Map // Encoding → tokenizer.Codec

func codec(e Encoding) tokenizer.Codec {
	if c, ok := codecs.Load(e); ok {
		return c.(tokenizer.Codec)
	}
	c, err := tokenizer.Get(e)
	if err != nil {
		// The two encodings used are compiled in; a failure is a build
		// defect the package's tests catch.
		panic("tokenest: " + err.Error())
	}
	v, _ := codecs.LoadOrStore(e, c)
	return v.(tokenizer.Codec)
}

// Per-message framing, as OpenAI counts a chat's tokens: each message
// costs 3 tokens besides its text, and the reply is primed with 3.
const (
	perMessage = 3
	perReply   = 3
)

// inputMembers are the top-level members whose text is a model's input.
var inputMembers = [...]string{"messages", "input", "instructions", "system", "prompt", "tools", "functions", "contents", "systemInstruction", "system_instruction"}

// skipped are object members whose values are not text the model reads
// as tokens of its own (media payloads and references) or are framing
// counted per message instead.
var skipped = map[string]bool{
	"type": true, "image_url": true, "url": true, "data": true, "file_data": true, "file_id": true,
	"input_audio": true, "detail": true, "mime_type": true, "media_type": true, "mimeType": true,
	"cache_control": true, "signature": true, "inlineData": true, "inline_data": true, "fileData": true,
	"image": true, "audio": true, "video": true, "source": true,
}

// Count returns the input tokens of a request body (an OpenAI, Anthropic
// or Gemini request, checked by jsonlimit), counted with e. When limit is
// above 0 the count stops once it passes limit and returns a figure
// above limit: a caller asking whether the input fits a window gets its
// answer without tokenizing the rest.
//
// Count never exceeds len(body) + a few tokens: a BPE token covers at
// least one byte of the text, and the text is no longer than its JSON
// (see Fits).
func Count(body []byte, e Encoding, limit int64) int64 {
	c := &counter{codec: codec(e), limit: limit}
	for _, name := range inputMembers {
		v := gjson.GetBytes(body, name)
		if !v.Exists() {
			continue
		}
		switch name {
		case "tools", "functions":
			c.text(v.Raw)
		case "messages", "contents":
			c.n += perReply
			c.messages(v)
		case "input", "prompt":
			if v.IsArray() {
				c.n += perReply
				c.messages(v)
			} else {
				c.value(v)
			}
		default:
			c.value(v)
		}
		if c.done() {
			break
		}
	}
	return c.n
}

// Fits reports, without tokenizing, whether body's input is certain to
// fit window tokens: its bytes bound its tokens (each token is one byte
// or more of text, JSON escapes only lengthen the text, and each
// message's framing tokens are fewer than the bytes of its JSON object).
func Fits(body []byte, window int64) bool {
	return int64(len(body)) <= window
}

type counter struct {
	codec tokenizer.Codec
	n     int64
	limit int64
}

func (c *counter) done() bool { return c.limit > 0 && c.n > c.limit }

// messages counts an array of messages (or items, parts, prompts).
func (c *counter) messages(v gjson.Result) {
	v.ForEach(func(_, m gjson.Result) bool {
		switch m.Type {
		case gjson.Number:
			c.n++ // a prompt given as token ids
		case gjson.JSON:
			if m.IsObject() {
				c.n += perMessage
			}
			c.value(m)
		default:
			c.value(m)
		}
		return !c.done()
	})
}

// value counts the text of any value: strings, and the members of
// objects and arrays that are not skipped.
func (c *counter) value(v gjson.Result) {
	switch {
	case v.Type == gjson.String:
		c.text(v.Str)
	case v.IsObject():
		v.ForEach(func(k, m gjson.Result) bool {
			if !skipped[k.Str] {
				c.value(m)
			}
			return !c.done()
		})
	case v.IsArray():
		v.ForEach(func(_, m gjson.Result) bool {
			if m.Type == gjson.Number {
				c.n++
			} else {
				c.value(m)
			}
			return !c.done()
		})
	}
}

// chunk bounds one tokenizer call, so a limit stops a long string early
// too. A cut falls on a newline where one is near, so few tokens straddle
// it.
const chunk = 64 << 10

func (c *counter) text(s string) {
	for len(s) > 0 && !c.done() {
		part := s
		if len(part) > chunk {
			part = s[:chunk]
			if i := strings.LastIndexByte(part, '\n'); i > chunk/2 {
				part = s[:i+1]
			} else {
				i := chunk
				for i > chunk-4 && s[i]&0xC0 == 0x80 {
					i-- // not inside a UTF-8 sequence
				}
				part = s[:i]
			}
		}
		s = s[len(part):]
		n, _ := c.codec.Count(part)
		c.n += int64(n)
	}
}

// CountString returns the tokens of one text with e.
func CountString(s string, e Encoding) int64 {
	n, _ := codec(e).Count(s)
	return int64(n)
}
