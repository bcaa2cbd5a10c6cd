package semantic

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseEmbedding(t *testing.T) {
	b64 := func(fs ...float32) string {
		raw := make([]byte, 4*len(fs))
		for i, f := range fs {
			binary.LittleEndian.PutUint32(raw[i*4:], math.Float32bits(f))
		}
		return base64.StdEncoding.EncodeToString(raw)
	}
	big := "[" + strings.Repeat("0.1,", MaxDims) + "0.1]"
	tests := []struct {
		name, body string
		want       []float32
	}{
		{"openai floats", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1,2e-3]}],"model":"m"}`, []float32{0.5, -1, 0.002}},
		{"index 0 chosen", `{"data":[{"index":1,"embedding":[9]},{"index":0,"embedding":[1,2]}]}`, []float32{1, 2}},
		{"no index field", `{"data":[{"embedding":[3]}]}`, []float32{3}},
		{"base64", `{"data":[{"index":0,"embedding":"` + b64(1.5, -2) + `"}]}`, []float32{1.5, -2}},
		{"max dims", `{"data":[{"embedding":[` + strings.TrimSuffix(strings.Repeat("1,", MaxDims), ",") + `]}]}`, nil},
		{"too many dims", `{"data":[{"embedding":` + big + `}]}`, nil},
		{"too many base64 dims", `{"data":[{"embedding":"` + b64(make([]float32, MaxDims+1)...) + `"}]}`, nil},
		{"base64 NaN", `{"data":[{"embedding":"` + b64(float32(math.NaN())) + `"}]}`, nil},
		{"base64 odd length", `{"data":[{"embedding":"AAAAAAA="}]}`, nil},
		{"not base64", `{"data":[{"embedding":"!!"}]}`, nil},
		{"string value", `{"data":[{"embedding":[1,"2"]}]}`, nil},
		{"out of float32", `{"data":[{"embedding":[1e300]}]}`, nil},
		{"empty", `{"data":[{"embedding":[]}]}`, nil},
		{"no data", `{"error":{"message":"boom"}}`, nil},
		{"no index 0", `{"data":[{"index":1,"embedding":[1]}]}`, nil},
		{"not JSON", `{"data":[`, nil},
		{"array", `[1]`, nil},
		{"too deep", `{"data":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEmbedding([]byte(tt.body))
			if tt.name == "max dims" {
				if err != nil || len(got) != MaxDims {
					t.Fatalf("len %d, err %v; want %d dims", len(got), err, MaxDims)
				}
				return
			}
			if tt.want == nil {
				if err == nil || !errors.Is(err, ErrMalformedEmbedding) {
					t.Fatalf("err = %v, want ErrMalformedEmbedding (got %v)", err, got)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestEmbeddingRequest(t *testing.T) {
	b := EmbeddingRequest("text-embedding-3-small", "user: \"hi\"\n")
	r := gjson.ParseBytes(b)
	if r.Get("model").Str != "text-embedding-3-small" || r.Get("input").Str != "user: \"hi\"\n" || r.Get("encoding_format").Str != "float" {
		t.Fatalf("request = %s", b)
	}
}
