package vertex

import (
	"encoding/json"
	"io"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
)

var (
	geminiChat = gemini.Chat{Provider: Slug}
	claudeChat = anthropic.Chat{Provider: Slug}
)

// chat picks the Gemini or the Anthropic translation by the call's model,
// the same choice Prepare made.
type chat struct{}

func pick(c *providers.Call) providers.Translator {
	if pub, _, _ := SplitModel(c.Model); pub == Anthropic {
		return claudeChat
	}
	return geminiChat
}

// Response implements providers.Translator.
func (chat) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	return pick(c).Response(c, body)
}

// Error implements providers.Translator.
func (chat) Error(c *providers.Call, status int, body []byte) []byte {
	return pick(c).Error(c, status, body)
}

// Stream implements providers.Translator.
func (chat) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return pick(c).Stream(c, w)
}

// predictRequest is the :predict body of Vertex AI text embedding models.
type predictRequest struct {
	Instances  []predictInstance `json:"instances"`
	Parameters *predictParams    `json:"parameters,omitempty"`
}

type predictParams struct {
	OutputDimensionality *int64 `json:"outputDimensionality,omitempty"`
}

type predictInstance struct {
	Content  string `json:"content"`
	TaskType string `json:"task_type,omitempty"`
}

func buildPredict(body []byte) ([]byte, error) {
	in, err := oaiwire.ParseEmbedding(body)
	if err != nil {
		return nil, err
	}
	out := predictRequest{Instances: make([]predictInstance, len(in.Input))}
	task := gemini.TaskType(in.InputType)
	for i, text := range in.Input {
		out.Instances[i] = predictInstance{Content: text, TaskType: task}
	}
	if in.Dimensions != nil {
		out.Parameters = &predictParams{OutputDimensionality: in.Dimensions}
	}
	return json.Marshal(&out)
}

// embeddings translates :predict answers; usage is the sum of each
// prediction's statistics.token_count.
type embeddings struct{}

// Response implements providers.Translator.
func (embeddings) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	var r struct {
		Predictions []struct {
			Embeddings struct {
				Values     []float64 `json:"values"`
				Statistics struct {
					TokenCount int64 `json:"token_count"`
				} `json:"statistics"`
			} `json:"embeddings"`
		} `json:"predictions"`
	}
	if err := oaiwire.CheckAnswer(Slug, body); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	if len(r.Predictions) == 0 {
		return nil, nil, oaiwire.MissingField(Slug, "predictions")
	}
	u := &providers.Usage{}
	vecs := make([][]float64, len(r.Predictions))
	for i := range r.Predictions {
		if r.Predictions[i].Embeddings.Values == nil {
			return nil, nil, oaiwire.MissingField(Slug, "predictions[].embeddings.values")
		}
		vecs[i] = r.Predictions[i].Embeddings.Values
		u.PromptTokens += r.Predictions[i].Embeddings.Statistics.TokenCount
	}
	u.TotalTokens = u.PromptTokens
	b64 := gjson.GetBytes(c.Body, "encoding_format").Str == "base64"
	return oaiwire.EmbeddingList(c.Model, vecs, b64, u), u, nil
}

// Error implements providers.Translator.
func (embeddings) Error(c *providers.Call, status int, body []byte) []byte {
	return geminiChat.Error(c, status, body)
}

// Stream implements providers.Translator; embeddings never stream, so
// it is not called.
func (embeddings) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return geminiChat.Stream(c, w)
}
