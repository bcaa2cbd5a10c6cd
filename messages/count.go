package messages

import (
	"strconv"
)

// Estimate is a rough count of a request's input tokens for targets that
// cannot count them: about four characters of text a token, the rule of
// thumb for English text with every tokenizer in use, plus a fixed share
// per message, image and tool. The answer says it is an estimate (the
// handler's x-gateway-token-estimate header): it is for sizing a prompt,
// never for billing.
func Estimate(r *Request) int64 {
	var chars, extra int64
	if r.System != nil {
		chars += textChars(r.System)
	}
	for i := range r.Messages {
		extra += 4 // role and turn framing
		chars += textChars(&r.Messages[i].Content)
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		chars += int64(len(t.Name) + len(t.Description) + len(t.InputSchema))
		extra += 8
	}
	return (chars+3)/4 + extra
}

// imageTokens is the estimate of one image: Anthropic's formula
// (width×height/750) for a typical 1000×1000 picture.
const imageTokens = 1334

// textChars counts the characters of a content's text, and images as
// their token estimate in characters.
func textChars(c *Content) int64 {
	if !c.IsBlocks {
		return int64(len(c.Text))
	}
	var n int64
	for i := range c.Blocks {
		b := &c.Blocks[i]
		switch b.Type {
		case "image":
			n += imageTokens * 4
		case "document":
			if b.Source != nil {
				n += int64(len(b.Source.Data)) * 3 / 4
			}
		case "tool_use":
			n += int64(len(b.Name) + len(b.Input))
		case "tool_result":
			if b.Content != nil {
				n += textChars(b.Content)
			}
		default:
			n += int64(len(b.Text) + len(b.Thinking))
		}
	}
	return n
}

// CountBody is the count_tokens answer for n input tokens.
func CountBody(n int64) []byte {
	return append(strconv.AppendInt([]byte(`{"input_tokens":`), n, 10), '}')
}
