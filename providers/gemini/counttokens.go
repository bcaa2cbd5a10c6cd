package gemini

import (
	"io"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Token counting. A /v1/messages/count_tokens call to a Gemini API target
// is answered by Gemini's own count, models/{model}:countTokens, rather
// than the gateway's estimate: the Messages body is translated as a
// Messages call to Gemini is (to a chat completion, then to a
// generateContent request) and sent as countTokens' generateContentRequest,
// so the system instruction and tools are counted too; Gemini's
// {"totalTokens":N} is answered as Anthropic's {"input_tokens":N}.

// SpeaksMessages implements providers.MessagesSpeaker: count_tokens is
// sent to countTokens "natively" (this package translates the body
// itself); a Messages call proper is translated through chat completions
// as before.
func (provider) SpeaksMessages(op providers.Operation, _ string) bool {
	return op == providers.OpCountTokens
}

// CountRequest returns the countTokens body of a Messages count_tokens
// body for model: {"generateContentRequest":{"model":"models/<model>",
// …the generateContent request…}}.
func CountRequest(body []byte, model string) ([]byte, error) {
	gen, err := CountContents(body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(gen)+64+len(model))
	out = append(out, `{"generateContentRequest":{"model":`...)
	out = oaiwire.AppendString(out, "models/"+model)
	if rest := gen[1:]; len(rest) > 1 { // gen is an object: "{…}"
		out = append(out, ',')
		out = append(out, rest...)
	} else {
		out = append(out, '}')
	}
	return append(out, '}'), nil
}

// CountContents returns the generateContent request a Messages
// count_tokens body is counted as: contents, systemInstruction, tools
// and generationConfig, the members countTokens takes (Vertex AI's at its
// top level, the Gemini API's inside generateContentRequest).
func CountContents(body []byte) ([]byte, error) {
	r, err := messages.Parse(body, true)
	if err != nil {
		return nil, err
	}
	chat, err := messages.ToChat(r)
	if err != nil {
		return nil, err
	}
	gen, err := BuildRequest(chat)
	if err != nil {
		return nil, err
	}
	var v [len(countMembers)][]byte
	jsonlimit.Members(gen, countMembers[:], v[:])
	out := append(make([]byte, 0, len(gen)), '{')
	for i, name := range countMembers {
		if v[i] == nil {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = oaiwire.AppendString(out, name)
		out = append(out, ':')
		out = append(out, v[i]...)
	}
	return append(out, '}'), nil
}

// countMembers are the members of a generateContent request countTokens
// takes.
var countMembers = [...]string{"contents", "systemInstruction", "tools", "generationConfig"}

// CountTokens translates countTokens' answer, {"totalTokens":N,…}, into
// count_tokens', {"input_tokens":N}.
type CountTokens struct {
	// Provider is the slug named in error messages.
	Provider string
}

// Response implements providers.Translator.
func (t CountTokens) Response(_ *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	n := gjson.GetBytes(body, "totalTokens")
	if jsonlimit.Object(body) != nil || n.Type != gjson.Number || n.Int() < 0 {
		return nil, nil, oaiwire.MissingField(t.Provider, "totalTokens")
	}
	return messages.CountBody(n.Int()), nil, nil
}

// Error implements providers.Translator: the error in Anthropic's shape,
// which count_tokens' clients read.
func (CountTokens) Error(_ *providers.Call, status int, body []byte) []byte {
	return messages.Reshape(status, body)
}

// Stream implements providers.Translator; countTokens never streams, so
// what comes is passed as it is.
func (CountTokens) Stream(_ *providers.Call, w io.Writer) providers.StreamConverter {
	return passThrough{w}
}

// passThrough is the StreamConverter of a call that does not stream.
type passThrough struct{ io.Writer }

func (passThrough) Close() error            { return nil }
func (passThrough) Usage() *providers.Usage { return nil }
