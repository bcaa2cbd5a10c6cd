package vertex

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

// serviceAccount returns a service account JSON with a fresh RSA key
// whose token_uri is tokenURL.
func serviceAccount(t testing.TB, project, tokenURL string) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": project, "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "gw@" + project + ".iam.gserviceaccount.com", "client_id": "1",
		"token_uri": tokenURL,
	})
	return b
}

// tokenServer is a fake OAuth token endpoint counting fetches.
func tokenServer(t testing.TB, status int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
			return
		}
		io.WriteString(w, `{"access_token":"ya29.test-token","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func prepare(p *provider, c *providers.Call, s *providers.Settings) (*providers.Upstream, error) {
	u := &providers.Upstream{Header: http.Header{}}
	return u, p.Prepare(c, s, u)
}

func TestPrepareURLs(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name     string
		op       providers.Operation
		model    string
		stream   bool
		settings providers.Settings
		url      string
		body     string // substring of the upstream body
	}{
		{"gemini default region", providers.OpChat, "gemini-2.5-pro", false, providers.Settings{APIKey: "tok", CloudCProjectID: "proj"},
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", `"contents"`},
		{"gemini stream europe", providers.OpChat, "google/gemini-2.0-flash", true, providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CloudCRegion: "europe-west4"},
			"https://europe-west4-aiplatform.googleapis.com/v1/projects/proj/locations/europe-west4/publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse", `"contents"`},
		{"global", providers.OpChat, "gemini-2.5-pro", false, providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CloudCRegion: "global"},
			"https://aiplatform.googleapis.com/v1/projects/proj/locations/global/publishers/google/models/gemini-2.5-pro:generateContent", `"contents"`},
		{"claude", providers.OpChat, "claude-sonnet-4-5@20250929", false, providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CloudCRegion: "us-east5"},
			"https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict", `"anthropic_version":"vertex-2023-10-16"`},
		{"claude stream publisher", providers.OpChat, "anthropic/claude-3-5-haiku@20241022", true, providers.Settings{APIKey: "tok", CloudCProjectID: "proj"},
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/anthropic/models/claude-3-5-haiku@20241022:streamRawPredict", `"stream":true`},
		{"messages (native Claude)", providers.OpMessages, "claude-sonnet-4-5@20250929", false, providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CloudCRegion: "us-east5"},
			"https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict", `"anthropic_version":"vertex-2023-10-16"`},
		{"messages stream", providers.OpMessages, "anthropic/claude-3-5-haiku@20241022", true, providers.Settings{APIKey: "tok", CloudCProjectID: "proj"},
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/anthropic/models/claude-3-5-haiku@20241022:streamRawPredict", `"messages":[{"role":"user","content":"hi"}]`},
		{"custom host", providers.OpChat, "gemini-2.5-pro", false, providers.Settings{APIKey: "tok", CloudCProjectID: "proj", CustomHost: "http://127.0.0.1:9/"},
			"http://127.0.0.1:9/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", `"contents"`},
		{"embeddings", providers.OpEmbeddings, "text-embedding-005", false, providers.Settings{APIKey: "tok", CloudCProjectID: "proj"},
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/text-embedding-005:predict", `"instances"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := chat
			if tc.op == providers.OpEmbeddings {
				body = `{"model":"m","input":"hi"}`
			}
			c := &providers.Call{Op: tc.op, Method: "POST", Model: tc.model, Stream: tc.stream, Body: []byte(body),
				Header: http.Header{"Anthropic-Beta": {"context-1m-2025-08-07"}}}
			u, err := prepare(&provider{}, c, &tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			if u.URL.String() != tc.url {
				t.Fatalf("url = %s\nwant  %s", u.URL, tc.url)
			}
			if u.Header.Get("Authorization") != "Bearer tok" || !strings.Contains(string(u.Body), tc.body) {
				t.Fatalf("auth %q body %s", u.Header.Get("Authorization"), u.Body)
			}
			if strings.Contains(tc.url, "anthropic") {
				if u.Header.Get("Anthropic-Beta") != "context-1m-2025-08-07" || u.Header.Get("anthropic-version") != "" || strings.Contains(string(u.Body), `"model"`) {
					t.Fatalf("anthropic on vertex: headers %v body %s", u.Header, u.Body)
				}
			}
		})
	}
}

func TestPrepareErrors(t *testing.T) {
	chat := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	cases := []struct {
		name   string
		op     providers.Operation
		model  string
		s      providers.Settings
		status int
		param  string
	}{
		{"no credentials", providers.OpChat, "gemini", providers.Settings{CloudCProjectID: "p"}, 401, ""},
		{"no project", providers.OpChat, "gemini", providers.Settings{APIKey: "t"}, 400, "cloudc_project_id"},
		{"bad region", providers.OpChat, "gemini", providers.Settings{APIKey: "t", CloudCProjectID: "p", CloudCRegion: "evil.com/x"}, 400, "cloudc_region"},
		{"bad project", providers.OpChat, "gemini", providers.Settings{APIKey: "t", CloudCProjectID: "p/../../x"}, 400, "cloudc_project_id"},
		{"bad publisher", providers.OpChat, "meta/llama", providers.Settings{APIKey: "t", CloudCProjectID: "p"}, 400, "model"},
		{"bad model", providers.OpChat, "gemini?x", providers.Settings{APIKey: "t", CloudCProjectID: "p"}, 400, "model"},
		{"claude embeddings", providers.OpEmbeddings, "claude-3", providers.Settings{APIKey: "t", CloudCProjectID: "p"}, 400, ""},
		{"completions", providers.OpCompletions, "gemini", providers.Settings{APIKey: "t", CloudCProjectID: "p"}, 400, ""},
		{"bad sa", providers.OpChat, "gemini", providers.Settings{CloudCServiceAccountJSON: json.RawMessage(`{"type":"service_account"}`)}, 400, "cloudc_service_account_json"},
		{"sa token_uri not http", providers.OpChat, "gemini", providers.Settings{CloudCServiceAccountJSON: serviceAccount(t, "p", "file:///etc/passwd")}, 400, "cloudc_service_account_json"},
		{"sa token_uri with userinfo", providers.OpChat, "gemini", providers.Settings{CloudCServiceAccountJSON: serviceAccount(t, "p", "https://u:p@oauth2.googleapis.com/token")}, 400, "cloudc_service_account_json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := chat
			if tc.op == providers.OpEmbeddings {
				body = []byte(`{"input":"x"}`)
			}
			_, err := prepare(&provider{}, &providers.Call{Op: tc.op, Model: tc.model, Body: body}, &tc.s)
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != tc.status || (tc.param != "" && ae.Param != tc.param) {
				t.Fatalf("err = %#v", err)
			}
		})
	}
}

func TestServiceAccountTokenCached(t *testing.T) {
	srv, fetches := tokenServer(t, http.StatusOK)
	sa := serviceAccount(t, "sa-project", srv.URL+"/token")
	p := &provider{}
	c := &providers.Call{Op: providers.OpChat, Model: "gemini-2.5-pro", Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`)}
	for i := 0; i < 3; i++ {
		// A reload hands a fresh copy of the same JSON: the cache key is
		// its fingerprint, not its address.
		s := &providers.Settings{CloudCServiceAccountJSON: append(json.RawMessage(nil), sa...)}
		u, err := prepare(p, c, s)
		if err != nil {
			t.Fatal(err)
		}
		if u.Header.Get("Authorization") != "Bearer ya29.test-token" || !strings.Contains(u.URL.Path, "/projects/sa-project/") {
			t.Fatalf("auth %q url %s", u.Header.Get("Authorization"), u.URL)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("token fetched %d times, want 1", n)
	}
	// A string-encoded copy of the same account shares the entry.
	quoted, _ := json.Marshal(string(sa))
	if _, err := prepare(p, c, &providers.Settings{CloudCServiceAccountJSON: quoted, CloudCProjectID: "other"}); err != nil {
		t.Fatal(err)
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("token fetched %d times after quoted copy, want 1", n)
	}
	for k := range p.tokens.entries {
		if strings.Contains(string(k.sum[:]), "PRIVATE") {
			t.Fatal("cache keyed by key material")
		}
	}
}

func TestServiceAccountRefused(t *testing.T) {
	srv, _ := tokenServer(t, http.StatusBadRequest)
	_, err := prepare(&provider{}, &providers.Call{Op: providers.OpChat, Model: "g", Body: []byte(`{"messages":[{"role":"user","content":"x"}]}`)},
		&providers.Settings{CloudCServiceAccountJSON: serviceAccount(t, "p", srv.URL)})
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Status != 401 || !strings.Contains(ae.Message, "invalid_grant") || strings.Contains(ae.Message, srv.URL) {
		t.Fatalf("err = %#v", err)
	}
}

func TestTokenCacheBounded(t *testing.T) {
	var tc tokens
	for i := 0; i < maxAccounts+10; i++ {
		tc.add(accountKey{sum: [32]byte{byte(i), byte(i >> 8)}}, &account{})
	}
	if len(tc.entries) != maxAccounts || len(tc.order) != maxAccounts {
		t.Fatalf("cache holds %d/%d entries", len(tc.entries), len(tc.order))
	}
}

func TestEmbeddings(t *testing.T) {
	got, err := buildPredict(goldentest.Read(t, "testdata/embed_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, got, "testdata/embed_request.vertex.json")
	c := &providers.Call{Model: "text-embedding-005", Body: []byte(`{}`)}
	out, u, err := embeddings{}.Response(c, goldentest.Read(t, "testdata/predict_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, out, "testdata/predict_response.openai.json")
	if u.PromptTokens != 6 || u.TotalTokens != 6 {
		t.Fatalf("usage = %+v", u)
	}
}

func TestChatPicksTranslation(t *testing.T) {
	claude := &providers.Call{Model: "claude-3-5-haiku@20241022"}
	out, _, err := chat{}.Response(claude, []byte(`{"id":"msg_1","type":"message","model":"claude-3-5-haiku","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	if err != nil || !strings.Contains(string(out), `"content":"hi"`) || !strings.Contains(string(out), `"provider":"vertex-ai"`) {
		t.Fatalf("claude: %s %v", out, err)
	}
	gem := &providers.Call{Model: "gemini-2.5-pro"}
	out, _, err = chat{}.Response(gem, []byte(`{"candidates":[{"content":{"parts":[{"text":"yo"}]},"finishReason":"STOP"}]}`))
	if err != nil || !strings.Contains(string(out), `"content":"yo"`) {
		t.Fatalf("gemini: %s %v", out, err)
	}
	e := chat{}.Error(claude, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`))
	if !strings.Contains(string(e), `"message":"bad"`) {
		t.Fatalf("error: %s", e)
	}
}

// Only Claude models take the Messages API on Vertex AI; a Gemini model
// there is translated by the gateway, never sent a Messages body. Both
// count tokens natively (a Gemini model with countTokens).
func TestMessagesOnlyClaude(t *testing.T) {
	p := &provider{}
	if !p.SpeaksMessages(providers.OpMessages, "claude-sonnet-4-5@20250929") || p.SpeaksMessages(providers.OpMessages, "gemini-2.5-pro") ||
		!p.SpeaksMessages(providers.OpCountTokens, "claude-sonnet-4-5@20250929") || !p.SpeaksMessages(providers.OpCountTokens, "gemini-2.5-pro") ||
		p.SpeaksMessages(providers.OpChat, "claude-sonnet-4-5@20250929") {
		t.Fatal("SpeaksMessages")
	}
	c := &providers.Call{Op: providers.OpMessages, Method: "POST", Model: "gemini-2.5-pro", Body: []byte(`{"model":"gemini-2.5-pro"}`), Header: http.Header{}}
	if _, err := prepare(p, c, &providers.Settings{APIKey: "tok", CloudCProjectID: "proj"}); err == nil {
		t.Fatal("a Messages body was sent to a Gemini model")
	}
}
