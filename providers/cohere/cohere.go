// Package cohere registers the "cohere" provider: OpenAI chat completions
// translated to and from Cohere's v2 chat API (streams included) and
// embeddings through v2 embed. Other paths (rerank, …) are passed through
// to the v2 API with Cohere's authentication.
package cohere

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Slug is the provider's name.
const Slug = "cohere"

// BaseURL is Cohere's API host. custom_host replaces it, as in the
// reference gateway, and the versioned paths (/v2/chat, /v2/embed) are
// appended to either.
const BaseURL = "https://api.cohere.com"

// apiVersion prefixes every path the gateway sends to Cohere.
const apiVersion = "/v2"

// DefaultInputType is sent to embed when the request names none: Cohere
// requires one, and OpenAI's embeddings are most often stored documents.
const DefaultInputType = "search_document"

func init() {
	providers.Register(Slug, provider{})
}

type provider struct{}

// Prepare implements providers.Provider.
func (provider) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	base, err := providers.BaseURL(s.CustomHost, BaseURL, "")
	if err != nil {
		return err
	}
	if s.APIKey == "" {
		return providers.MissingKey(Slug, "send Authorization: Bearer <Cohere API key>, or use a virtual key")
	}
	path, query, body, method := c.Path, c.RawQuery, c.Body, c.Method
	switch c.Op {
	case providers.OpChat:
		body, err = BuildRequest(c.Body, c.Stream)
		path, query, method = "/chat", "", http.MethodPost
	case providers.OpEmbeddings:
		body, err = buildEmbed(c.Body)
		path, query, method = "/embed", "", http.MethodPost
	case providers.OpProxy, providers.OpModels:
		// Passed through: Cohere-native endpoints such as /rerank.
	default:
		return oaiwire.Unsupported(Slug, "/v1"+c.Path)
	}
	if err != nil {
		return err
	}
	u.URL = providers.JoinParsedURL(base, apiVersion+path, query)
	u.Method, u.Body = method, body
	u.Header.Set("Authorization", "Bearer "+s.APIKey)
	if c.Op == providers.OpChat || c.Op == providers.OpEmbeddings {
		u.Header.Set("Content-Type", "application/json")
	}
	return nil
}

// Translator implements providers.Provider.
func (provider) Translator(op providers.Operation) providers.Translator {
	switch op {
	case providers.OpChat:
		return chat{}
	case providers.OpEmbeddings:
		return embeddings{}
	}
	return nil
}

type embedRequest struct {
	Model           string   `json:"model"`
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension *int64   `json:"output_dimension,omitempty"`
}

func buildEmbed(body []byte) ([]byte, error) {
	in, err := oaiwire.ParseEmbedding(body)
	if err != nil {
		return nil, err
	}
	out := embedRequest{
		Model:           in.Model,
		Texts:           in.Input,
		InputType:       in.InputType,
		EmbeddingTypes:  []string{"float"},
		OutputDimension: in.Dimensions,
	}
	if out.InputType == "" {
		out.InputType = DefaultInputType
	}
	return json.Marshal(&out)
}

// embeddings translates v2 embed answers (embeddings.float).
type embeddings struct{}

// Response implements providers.Translator.
func (embeddings) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	var r struct {
		Embeddings struct {
			Float [][]float64 `json:"float"`
		} `json:"embeddings"`
		Meta struct {
			BilledUnits struct {
				InputTokens int64 `json:"input_tokens"`
			} `json:"billed_units"`
		} `json:"meta"`
	}
	if err := oaiwire.CheckAnswer(Slug, body); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	if r.Embeddings.Float == nil {
		return nil, nil, oaiwire.MissingField(Slug, "embeddings.float")
	}
	u := &providers.Usage{PromptTokens: r.Meta.BilledUnits.InputTokens, TotalTokens: r.Meta.BilledUnits.InputTokens}
	b64 := gjson.GetBytes(c.Body, "encoding_format").Str == "base64"
	return oaiwire.EmbeddingList(c.Model, r.Embeddings.Float, b64, u), u, nil
}

// Error implements providers.Translator.
func (embeddings) Error(c *providers.Call, status int, body []byte) []byte {
	return chat{}.Error(c, status, body)
}

// Stream implements providers.Translator; embeddings never stream, so
// it is not called.
func (embeddings) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return chat{}.Stream(c, w)
}
