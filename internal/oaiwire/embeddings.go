package oaiwire

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// EmbeddingRequest is the part of an OpenAI embeddings request the
// translators read. InputType is an extension some providers (Cohere,
// Gemini's task type) need.
type EmbeddingRequest struct {
	Model          string `json:"model"`
	Input          []string
	EncodingFormat string `json:"encoding_format"`
	Dimensions     *int64 `json:"dimensions"`
	User           string `json:"user"`
	InputType      string `json:"input_type"`
}

// ParseEmbedding decodes an embeddings request. Only text input is
// accepted: token-id arrays cannot be translated for providers with
// their own tokenizers.
func ParseEmbedding(body []byte) (*EmbeddingRequest, error) {
	var raw struct {
		EmbeddingRequest
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, badShape(err)
	}
	r := raw.EmbeddingRequest
	in := bytes.TrimSpace(raw.Input)
	switch {
	case len(in) == 0 || bytes.Equal(in, []byte("null")):
		return nil, apierror.BadRequest("input", "input is required")
	case in[0] == '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return nil, apierror.BadRequest("input", "input must be a string or an array of strings")
		}
		r.Input = []string{s}
	default:
		if err := json.Unmarshal(in, &r.Input); err != nil {
			return nil, apierror.BadRequest("input", "input must be a string or an array of strings; token arrays are not supported by this provider")
		}
	}
	if len(r.Input) == 0 {
		return nil, apierror.BadRequest("input", "input must not be empty")
	}
	switch r.EncodingFormat {
	case "", "float", "base64":
	default:
		return nil, apierror.BadRequest("encoding_format", "encoding_format must be float or base64")
	}
	return &r, nil
}

// EmbeddingList builds an OpenAI embedding list from vectors, encoding
// each as a float array or, for encoding_format "base64", as base64 of
// little-endian float32s (what the OpenAI SDKs decode).
func EmbeddingList(model string, vectors [][]float64, base64Format bool, u *providers.Usage) []byte {
	b := make([]byte, 0, 64+len(vectors)*(len(model)+40))
	b = append(b, `{"object":"list","data":[`...)
	for i, v := range vectors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if base64Format {
			raw := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(float32(f)))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, f := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, f, 'g', -1, 64)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = AppendString(b, model)
	var prompt, total int64
	if u != nil {
		prompt, total = u.PromptTokens, u.TotalTokens
	}
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, prompt, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, "}}"...)
	return b
}
