package bedrock

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestEmbedRequest(t *testing.T) {
	tests := []struct {
		name, model, in, want string
	}{
		{"titan string", "amazon.titan-embed-text-v1", `{"input":"hello"}`, `{"inputText":"hello"}`},
		{"titan one-element array", "amazon.titan-embed-text-v2:0", `{"input":["hello"]}`, `{"inputText":"hello"}`},
		{"titan v2 dimensions", "amazon.titan-embed-text-v2:0", `{"input":"hi","dimensions":512,"encoding_format":"float","user":"u"}`, `{"inputText":"hi","dimensions":512}`},
		{"titan v1 ignores dimensions", "amazon.titan-embed-text-v1", `{"input":"hi","dimensions":512}`, `{"inputText":"hi"}`},
		{"cohere list", "cohere.embed-english-v3", `{"input":["a","b"]}`, `{"texts":["a","b"],"input_type":"search_document"}`},
		{"cohere string and input_type", "us.cohere.embed-multilingual-v3", `{"input":"q","input_type":"search_query","truncate":"END"}`, `{"texts":["q"],"input_type":"search_query","truncate":"END"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EmbedRequest(tt.model, []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestEmbedRequestErrors(t *testing.T) {
	tests := []struct {
		name, model, in, wantParam, wantMsg string
	}{
		{"titan many inputs", "amazon.titan-embed-text-v2:0", `{"input":["a","b"]}`, "input", "one text per call"},
		{"titan tokens", "amazon.titan-embed-text-v1", `{"input":[1,2,3]}`, "input", "one text per call"},
		{"titan token array of one", "amazon.titan-embed-text-v1", `{"input":[[1,2]]}`, "input", "token arrays"},
		{"cohere tokens", "cohere.embed-english-v3", `{"input":[1,2]}`, "input", "array of strings"},
		{"missing input", "cohere.embed-english-v3", `{}`, "input", "required"},
		{"unknown family", "amazon.nova-pro-v1:0", `{"input":"x"}`, "model", "titan-embed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EmbedRequest(tt.model, []byte(tt.in))
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tt.wantParam || !strings.Contains(ae.Message, tt.wantMsg) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestEmbedResponse(t *testing.T) {
	tests := []struct {
		name, model, req, body, want string
		usage                        providers.Usage
	}{
		{
			name: "titan", model: "amazon.titan-embed-text-v2:0", req: `{"input":"x"}`, body: "titan_embed_response.json",
			want:  `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.125,-0.5,0.0078125]}],"model":"amazon.titan-embed-text-v2:0","usage":{"prompt_tokens":3,"total_tokens":3}}`,
			usage: providers.Usage{PromptTokens: 3, TotalTokens: 3},
		},
		{
			name: "cohere", model: "cohere.embed-english-v3", req: `{"input":["first text","second text"]}`, body: "cohere_embed_response.json",
			want: `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25]},{"object":"embedding","index":1,"embedding":[1.0,0.0]}],"model":"cohere.embed-english-v3","usage":{"prompt_tokens":0,"total_tokens":0}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &providers.Call{Op: providers.OpEmbeddings, Model: tt.model, Body: []byte(tt.req)}
			got, usage, err := embedTranslator{}.Response(c, readTestdata(t, tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if *usage != tt.usage {
				t.Fatalf("usage = %+v", usage)
			}
		})
	}
}

func TestEmbedResponseBase64(t *testing.T) {
	c := &providers.Call{Model: "amazon.titan-embed-text-v1", Body: []byte(`{"input":"x","encoding_format":"base64"}`)}
	out, _, err := embedTranslator{}.Response(c, readTestdata(t, "titan_embed_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	i := strings.Index(s, `"embedding":"`) + len(`"embedding":"`)
	raw, err := base64.StdEncoding.DecodeString(s[i : i+strings.IndexByte(s[i:], '"')])
	if err != nil || len(raw) != 12 {
		t.Fatalf("bad base64 embedding in %s", out)
	}
	for j, want := range []float32{0.125, -0.5, 0.0078125} {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); got != want {
			t.Fatalf("[%d] = %v, want %v", j, got, want)
		}
	}
}

func TestEmbedResponseInvalid(t *testing.T) {
	for _, tt := range []struct{ model, body string }{
		{"amazon.titan-embed-text-v1", `nope`},
		{"amazon.titan-embed-text-v1", `{"embedding":"x"}`},
		{"cohere.embed-english-v3", `{"embeddings":{"int8":[[1]]}}`},
		{"other", `{}`},
	} {
		if _, _, err := (embedTranslator{}).Response(&providers.Call{Model: tt.model}, []byte(tt.body)); err == nil {
			t.Errorf("%s %s: no error", tt.model, tt.body)
		}
	}
}
