package gemini

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

type embedRequest struct {
	Requests []embedContent `json:"requests"`
}

type embedContent struct {
	Model                string  `json:"model"`
	Content              content `json:"content"`
	TaskType             string  `json:"taskType,omitempty"`
	OutputDimensionality *int64  `json:"outputDimensionality,omitempty"`
}

// TaskType maps the input_type extension to a Gemini task type; both
// Cohere-style names (search_document) and Gemini's own are accepted.
func TaskType(inputType string) string {
	switch strings.ToLower(inputType) {
	case "":
		return ""
	case "search_document", "retrieval_document":
		return "RETRIEVAL_DOCUMENT"
	case "search_query", "retrieval_query":
		return "RETRIEVAL_QUERY"
	}
	return strings.ToUpper(inputType)
}

// buildEmbedRequest builds a batchEmbedContents body: one request per
// input string.
func buildEmbedRequest(body []byte, model string) ([]byte, error) {
	in, err := oaiwire.ParseEmbedding(body)
	if err != nil {
		return nil, err
	}
	out := embedRequest{Requests: make([]embedContent, len(in.Input))}
	for i, text := range in.Input {
		out.Requests[i] = embedContent{
			Model:                "models/" + model,
			Content:              content{Parts: []part{{Text: text}}},
			TaskType:             TaskType(in.InputType),
			OutputDimensionality: in.Dimensions,
		}
	}
	return json.Marshal(&out)
}

// embeddings translates batchEmbedContents answers. The Gemini API
// reports no token counts for embeddings, so usage is zero.
type embeddings struct{}

// Response implements providers.Translator.
func (embeddings) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	var r struct {
		Embeddings []struct {
			Values []float64 `json:"values"`
		} `json:"embeddings"`
	}
	if err := oaiwire.CheckAnswer(Slug, body); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	if len(r.Embeddings) == 0 {
		return nil, nil, oaiwire.MissingField(Slug, "embeddings")
	}
	vecs := make([][]float64, len(r.Embeddings))
	for i := range r.Embeddings {
		if r.Embeddings[i].Values == nil {
			return nil, nil, oaiwire.MissingField(Slug, "embeddings[].values")
		}
		vecs[i] = r.Embeddings[i].Values
	}
	b64 := gjson.GetBytes(c.Body, "encoding_format").Str == "base64"
	return oaiwire.EmbeddingList(c.Model, vecs, b64, nil), nil, nil
}

// Error implements providers.Translator.
func (embeddings) Error(c *providers.Call, status int, body []byte) []byte {
	return Chat{Provider: Slug}.Error(c, status, body)
}

// Stream implements providers.Translator; embeddings never stream, so
// it is not called.
func (embeddings) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return Chat{Provider: Slug}.Stream(c, w)
}
