package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// embedKey is the embedding virtual key's provider credential; tests
// check it never reaches a log line.
const embedKey = "sk-embed-secret-5a7c0e2b9d"

// embedDims is the fake embedding model's dimension.
const embedDims = 32

// fakeEmbeddings is an OpenAI embeddings endpoint with deterministic
// vectors: a text of the table gets its vector, any other text a vector
// on an axis of its own (dissimilar to everything else), and down makes
// every call a 503.
type fakeEmbeddings struct {
	*httptest.Server
	mu     sync.Mutex
	table  map[string][]float32
	fresh  map[string]int // axis given to texts outside the table
	inputs []string
	down   bool
	// gen, when set, gives the vector of a text outside the table.
	gen func(text string) []float32
	// raw, when set, is sent as the answer to every call.
	raw string
}

func newFakeEmbeddings(t testing.TB, table map[string][]float32) *fakeEmbeddings {
	f := &fakeEmbeddings{table: table, fresh: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model          string `json:"model"`
		Input          string `json:"input"`
		EncodingFormat string `json:"encoding_format"`
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err := json.Unmarshal(body, &req)
	f.inputs = append(f.inputs, req.Input)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case f.raw != "":
		io.WriteString(w, f.raw)
		return
	case f.down:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`)
		return
	case r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer "+embedKey ||
		err != nil || req.Model != "text-embedding-3-small" || req.EncodingFormat != "float":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"unexpected embeddings request %s","type":"invalid_request_error","param":null,"code":null}}`, r.URL.Path)
		return
	}
	vec, ok := f.table[req.Input]
	if !ok && f.gen != nil {
		vec, ok = f.gen(req.Input), true
	}
	if !ok {
		n, seen := f.fresh[req.Input]
		if !seen {
			n = 8 + len(f.fresh)
			f.fresh[req.Input] = n
		}
		vec = axis(n % embedDims)
	}
	nums, _ := json.Marshal(vec)
	fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":%s}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`, nums)
}

// calls returns how many embeddings requests arrived.
func (f *fakeEmbeddings) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inputs)
}

func (f *fakeEmbeddings) setRaw(raw string) {
	f.mu.Lock()
	f.raw = raw
	f.mu.Unlock()
}

func (f *fakeEmbeddings) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// axis is the unit vector along dimension i.
func axis(i int) []float32 {
	v := make([]float32, embedDims)
	v[i] = 1
	return v
}

// near returns a unit vector at cosine cos from axis(0), leaning towards
// axis(j); two such vectors of different j are at cos_a·cos_b.
func near(cos float64, j int) []float32 {
	v := axis(0)
	v[0] = float32(cos)
	v[j] = float32(math.Sqrt(1 - cos*cos))
	return v
}

// lean returns cos·base + sin·axis(j), for a unit base orthogonal to
// axis(j): a vector at cosine cos from base.
func lean(base []float32, cos float64, j int) []float32 {
	v := make([]float32, embedDims)
	for i, x := range base {
		v[i] = float32(cos) * x
	}
	v[j] += float32(math.Sqrt(1 - cos*cos))
	return v
}

// echoChat is a chat provider whose answer names the question it was
// asked and the number of the call, so a test can tell which stored
// answer a cache served: "re: <last user message> [n]".
type echoChat struct {
	*fakeOpenAI
}

func newEchoChat(t testing.TB) *echoChat {
	e := &echoChat{newFakeOpenAI(t)}
	e.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		q := ""
		if n := len(req.Messages); n > 0 {
			q = req.Messages[n-1].Content
		}
		answer := fmt.Sprintf("re: %s [%d]", q, e.count())
		if req.Stream {
			writeChatStream(w, req.Model, []string{answer}, strings.Contains(string(body), `"include_usage":true`), nil)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		a, _ := json.Marshal(answer)
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, req.Model, a)
		return true
	}
	return e
}

// askBody is a chat request with a system prompt and one question.
func askBody(model, question string) []byte {
	q, _ := json.Marshal(question)
	return []byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":"Answer in one word."},{"role":"user","content":%s}]}`, model, q))
}

// answerOf returns the content of a chat completion.
func answerOf(t testing.TB, raw []byte) string {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) == 0 {
		t.Fatalf("not a chat completion: %s", raw)
	}
	return c.Choices[0].Message.Content
}

// semanticLLM is the llm block of the semantic cache tests: a second
// gateway key (another workspace) and the embedding virtual key.
func semanticLLM(emb *fakeEmbeddings, extra string) string {
	return fmt.Sprintf(`api_key other other-gateway-key-0123456789
		virtual_key embedder {
			provider openai
			api_key %s
			custom_host %s
		}
		semantic_cache {
			embedding embedder text-embedding-3-small
			threshold 0.95
			%s
		}`, embedKey, emb.URL, extra)
}
