package bedrock

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Embedding model families reachable through InvokeModel.
type embedFamily int

const (
	familyUnknown embedFamily = iota
	familyTitan
	familyCohere
)

// familyOf recognises a model id, an inference profile id ("us.cohere…")
// or an ARN by the family name it contains.
func familyOf(model string) embedFamily {
	switch {
	case strings.Contains(model, "amazon.titan-embed"):
		return familyTitan
	case strings.Contains(model, "cohere.embed"):
		return familyCohere
	}
	return familyUnknown
}

// EmbedRequest translates an OpenAI embeddings body into the model's
// InvokeModel body. Titan embeds one text per call and the gateway sends
// one upstream request per client request, so Titan accepts a single
// string (or a one-element array); Cohere takes a list.
func EmbedRequest(model string, body []byte) ([]byte, error) {
	input := gjson.GetBytes(body, "input")
	if !input.Exists() {
		return nil, apierror.BadRequest("input", "input is required")
	}
	switch familyOf(model) {
	case familyTitan:
		text := input
		if input.IsArray() {
			items := input.Array()
			if len(items) != 1 {
				return nil, apierror.BadRequest("input",
					"Titan embedding models embed one text per call and the gateway sends one upstream request per request: send input as a single string (got %d inputs)", len(items))
			}
			text = items[0]
		}
		if text.Type != gjson.String {
			return nil, apierror.BadRequest("input", "input must be a string for Titan embedding models (token arrays are not supported)")
		}
		req := struct {
			InputText  string `json:"inputText"`
			Dimensions int64  `json:"dimensions,omitempty"`
		}{InputText: text.String()}
		if d := gjson.GetBytes(body, "dimensions"); d.Exists() && strings.Contains(model, "titan-embed-text-v2") {
			req.Dimensions = d.Int()
		}
		return json.Marshal(&req)
	case familyCohere:
		var texts []string
		switch {
		case input.Type == gjson.String:
			texts = []string{input.String()}
		case input.IsArray():
			for _, it := range input.Array() {
				if it.Type != gjson.String {
					return nil, apierror.BadRequest("input", "input must be a string or an array of strings for Cohere embedding models")
				}
				texts = append(texts, it.String())
			}
		default:
			return nil, apierror.BadRequest("input", "input must be a string or an array of strings for Cohere embedding models")
		}
		// input_type is Cohere's own field; clients may send it, the
		// default suits indexing, which is what embeddings are mostly for.
		inputType := gjson.GetBytes(body, "input_type").String()
		if inputType == "" {
			inputType = "search_document"
		}
		req := struct {
			Texts     []string `json:"texts"`
			InputType string   `json:"input_type"`
			Truncate  string   `json:"truncate,omitempty"`
		}{Texts: texts, InputType: inputType, Truncate: gjson.GetBytes(body, "truncate").String()}
		return json.Marshal(&req)
	}
	return nil, apierror.BadRequest("model",
		"provider bedrock embeds with amazon.titan-embed-* and cohere.embed-* models; %q is neither", model)
}

// embedTranslator converts InvokeModel embedding answers to OpenAI's list.
type embedTranslator struct{}

// Response implements providers.Translator.
func (embedTranslator) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if err := oaiwire.CheckAnswer(Slug, body); err != nil {
		return nil, nil, err
	}
	asBase64 := gjson.GetBytes(c.Body, "encoding_format").String() == "base64"
	var vectors []gjson.Result
	var usage *providers.Usage
	switch familyOf(c.Model) {
	case familyTitan:
		v := gjson.GetBytes(body, "embedding")
		if !v.IsArray() {
			return nil, nil, errors.New("bedrock: titan response has no embedding")
		}
		vectors = []gjson.Result{v}
		n := gjson.GetBytes(body, "inputTextTokenCount").Int()
		usage = &providers.Usage{PromptTokens: n, TotalTokens: n}
	case familyCohere:
		e := gjson.GetBytes(body, "embeddings")
		if e.IsObject() {
			// embedding_types responses: {"float": [[...]]}.
			e = e.Get("float")
		}
		if !e.IsArray() {
			return nil, nil, errors.New("bedrock: cohere response has no float embeddings")
		}
		vectors = e.Array()
		// Cohere on Bedrock reports tokens only in a response header.
		usage = &providers.Usage{}
	default:
		return nil, nil, errors.New("bedrock: unknown embedding model family")
	}

	out := make([]byte, 0, len(body)+128)
	out = append(out, `{"object":"list","data":[`...)
	for i, v := range vectors {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"object":"embedding","index":`...)
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, `,"embedding":`...)
		if asBase64 {
			out = appendJSONString(out, floatsBase64(v))
		} else {
			out = append(out, v.Raw...)
		}
		out = append(out, '}')
	}
	out = append(out, `],"model":`...)
	out = appendJSONString(out, c.Model)
	u, _ := json.Marshal(struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}{usage.PromptTokens, usage.TotalTokens})
	out = append(out, `,"usage":`...)
	out = append(out, u...)
	out = append(out, '}')
	return out, usage, nil
}

// floatsBase64 encodes a vector as OpenAI's base64 format does: the
// little-endian float32 values, base64-encoded.
func floatsBase64(v gjson.Result) string {
	items := v.Array()
	b := make([]byte, 4*len(items))
	for i, it := range items {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(it.Float())))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Error implements providers.Translator.
func (embedTranslator) Error(_ *providers.Call, status int, body []byte) []byte {
	return ErrorBody(status, body)
}

// Stream implements providers.Translator. Embeddings never stream
// (Prepare clears Call.Stream), so this is never reached in practice.
func (embedTranslator) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return NewStreamConverter(c, w)
}
