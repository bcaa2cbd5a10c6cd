package semantic

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Embedder turns text into an embedding vector. The gateway implements it
// by sending an embeddings request through its own pipeline to the
// embedding target the operator configures. Its errors are logged, so
// they must not carry credentials.
type Embedder interface {
	Embed(ctx context.Context, text string) ([]float32, error)
}

// EmbedderFunc adapts a function to Embedder.
type EmbedderFunc func(ctx context.Context, text string) ([]float32, error)

// Embed calls f.
func (f EmbedderFunc) Embed(ctx context.Context, text string) ([]float32, error) { return f(ctx, text) }

// EmbeddingRequest returns an OpenAI-format embeddings request body for
// text, asking for float vectors.
func EmbeddingRequest(model, text string) []byte {
	b, _ := json.Marshal(struct {
		Model          string `json:"model"`
		Input          string `json:"input"`
		EncodingFormat string `json:"encoding_format"`
	}{model, text, "float"})
	return b
}

// ErrMalformedEmbedding is wrapped by every ParseEmbedding error.
var ErrMalformedEmbedding = errors.New("malformed embeddings answer")

// ParseEmbedding returns the vector of the first input (index 0) of an
// OpenAI-format embeddings answer: {"data":[{"index":0,"embedding":[…]}]}
// with the embedding as numbers or as base64 of little-endian float32s.
// It rejects invalid or deeply nested JSON, an empty vector, more than
// MaxDims dimensions, non-numbers and values outside float32.
func ParseEmbedding(body []byte) ([]float32, error) {
	if err := jsonlimit.Object(body); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEmbedding, err)
	}
	data := gjson.GetBytes(body, "data")
	if !data.IsArray() {
		return nil, fmt.Errorf("%w: no data array", ErrMalformedEmbedding)
	}
	var item gjson.Result
	data.ForEach(func(i, d gjson.Result) bool {
		idx := d.Get("index")
		if (idx.Exists() && idx.Type == gjson.Number && idx.Num == 0) || (!idx.Exists() && i.Int() == 0) {
			item = d
			return false
		}
		return true
	})
	emb := item.Get("embedding")
	switch {
	case emb.IsArray():
		return floats(emb)
	case emb.Type == gjson.String:
		return base64Floats(emb.Str)
	}
	return nil, fmt.Errorf("%w: no embedding for input 0", ErrMalformedEmbedding)
}

func floats(emb gjson.Result) ([]float32, error) {
	var (
		out []float32
		err error
	)
	emb.ForEach(func(_, v gjson.Result) bool {
		if len(out) >= MaxDims {
			err = fmt.Errorf("%w: more than %d dimensions", ErrMalformedEmbedding, MaxDims)
			return false
		}
		if v.Type != gjson.Number || math.Abs(v.Num) > math.MaxFloat32 {
			err = fmt.Errorf("%w: a value is not a float32 number", ErrMalformedEmbedding)
			return false
		}
		out = append(out, float32(v.Num))
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty embedding", ErrMalformedEmbedding)
	}
	return out, nil
}

func base64Floats(s string) ([]float32, error) {
	if base64.StdEncoding.DecodedLen(len(s)) > MaxDims*4+3 {
		return nil, fmt.Errorf("%w: more than %d dimensions", ErrMalformedEmbedding, MaxDims)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) == 0 || len(raw)%4 != 0 {
		return nil, fmt.Errorf("%w: embedding is not base64 float32s", ErrMalformedEmbedding)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		f := math.Float32frombits(binary.LittleEndian.Uint32(raw[i*4:]))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("%w: a value is not finite", ErrMalformedEmbedding)
		}
		out[i] = f
	}
	return out, nil
}
