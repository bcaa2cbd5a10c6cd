package guardrails

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// RequestType maps a gateway operation name (providers.Operation values
// such as "chat.completions") to the reference gateway's function name,
// prefixed "stream-" when streamed, which is what allowedRequestTypes and
// webhooks see.
func RequestType(op string, stream bool) string {
	t := op
	switch op {
	case "chat.completions":
		t = "chatComplete"
	case "completions":
		t = "complete"
	case "embeddings":
		t = "embed"
	case "messages":
		t = "messages"
	case "responses":
		t = "createModelResponse"
	case "images":
		t = "imageGenerate"
	case "audio.speech":
		t = "createSpeech"
	case "audio.transcriptions":
		t = "createTranscription"
	case "audio.translations":
		t = "createTranslation"
	case "models":
		t = "listModels"
	}
	if stream {
		return "stream-" + t
	}
	return t
}

// TextPart is one piece of text a check reads, with the JSON path it came
// from so a mutator can write it back.
type TextPart struct {
	Path string
	Text string
}

// TextParts returns the stage's current content part as the reference's
// getCurrentContentPart does: the last message (string content or each
// text part) for chat and messages, the prompt for completions, the input
// for embeddings and responses; after the request the first choice's
// content, or every text block of a messages answer. The shape read is
// the bodies' (Input.BodyType): a translated call's are the chat
// completion its target was sent and answered. Empty texts are kept
// (with their paths) so mutators can address them; Text drops them.
func TextParts(in *Input) []TextPart {
	body := in.Body()
	if in.Stage == AfterRequest {
		if body == nil {
			return nil
		}
		switch in.BodyType() {
		case "complete":
			return stringAt(body, "choices.0.text")
		case "messages":
			return partsAt(body, "content")
		case "createModelResponse":
			var out []TextPart
			gjson.GetBytes(body, "output").ForEach(func(i, item gjson.Result) bool {
				item.Get("content").ForEach(func(j, c gjson.Result) bool {
					if c.Get("type").Str == "output_text" {
						out = append(out, TextPart{Path: "output." + i.String() + ".content." + j.String() + ".text", Text: c.Get("text").Str})
					}
					return true
				})
				return true
			})
			return out
		default:
			if c := gjson.GetBytes(body, "choices.0.message.content"); c.IsArray() {
				return partsAt(body, "choices.0.message.content")
			}
			return stringAt(body, "choices.0.message.content")
		}
	}
	switch in.BodyType() {
	case "complete":
		return stringOrArrayAt(body, "prompt")
	case "embed", "createModelResponse":
		if r := gjson.GetBytes(body, "input"); r.IsArray() && in.BodyType() == "createModelResponse" {
			n := len(r.Array())
			if n == 0 {
				return nil
			}
			last := "input." + strconv.Itoa(n-1) + ".content"
			if gjson.GetBytes(body, last).IsArray() {
				return partsAt(body, last)
			}
			return stringAt(body, last)
		}
		return stringOrArrayAt(body, "input")
	default:
		n := gjson.GetBytes(body, "messages.#").Int()
		if n == 0 {
			return nil
		}
		p := "messages." + strconv.FormatInt(n-1, 10) + ".content"
		if gjson.GetBytes(body, p).IsArray() {
			return partsAt(body, p)
		}
		return stringAt(body, p)
	}
}

func stringAt(body []byte, path string) []TextPart {
	r := gjson.GetBytes(body, path)
	if r.Type != gjson.String {
		return nil
	}
	return []TextPart{{Path: path, Text: r.Str}}
}

func stringOrArrayAt(body []byte, path string) []TextPart {
	r := gjson.GetBytes(body, path)
	if !r.IsArray() {
		return stringAt(body, path)
	}
	var out []TextPart
	r.ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.String {
			out = append(out, TextPart{Path: path + "." + k.String(), Text: v.Str})
		}
		return true
	})
	return out
}

// partsAt reads the "text" of each content part of an array.
func partsAt(body []byte, path string) []TextPart {
	var out []TextPart
	gjson.GetBytes(body, path).ForEach(func(k, v gjson.Result) bool {
		if t := v.Get("text"); t.Type == gjson.String {
			out = append(out, TextPart{Path: path + "." + k.String() + ".text", Text: t.Str})
		}
		return true
	})
	return out
}

func currentText(in *Input) string {
	if in.Stage == AfterRequest && in.Response == nil {
		return in.ResponseText
	}
	parts := TextParts(in)
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0].Text
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// SetTextParts returns the stage's body with each part's text replaced by
// texts[i], for mutators.
func SetTextParts(body []byte, parts []TextPart, texts []string) ([]byte, error) {
	out := body
	var err error
	for i, p := range parts {
		if out, err = sjson.SetBytes(out, p.Path, texts[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
