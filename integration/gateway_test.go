package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

func TestOpenAIEmbeddings(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 1 || len(resp.Data[0].Embedding) != 3 || resp.Usage.PromptTokens != 4 {
		t.Fatalf("embeddings %+v", resp)
	}
}

func TestOpenAICompletions(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	resp, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:  "gpt-3.5-turbo-instruct",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Text != " world" || resp.Object != "text_completion" {
		t.Fatalf("completion %+v", resp)
	}

	// Out-of-bounds parameters are rejected before any upstream call.
	before := up.count()
	_, err = client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       "gpt-3.5-turbo-instruct",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello")},
		Temperature: openai.Float(2.5),
	})
	var apiErr *openai.Error
	if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "temperature" {
		t.Fatalf("want a 400 naming temperature, got %v", err)
	}
	if up.count() != before {
		t.Fatal("an invalid completion reached the provider")
	}
}

func TestOpenAIAudioMultipart(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	audio := bytes.Repeat([]byte{0x52, 0x49, 0x46, 0x46}, 4096)
	resp, err := client.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		Model: "whisper-1",
		File:  openai.File(bytes.NewReader(audio), "speech.wav", "audio/wav"),
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := up.last()
	if !strings.HasPrefix(seen.Header.Get("Content-Type"), "multipart/form-data; boundary=") {
		t.Fatalf("content type %q", seen.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(seen.Body), strings.TrimPrefix(seen.Header.Get("Content-Type"), "multipart/form-data; boundary="))
	var gotFile []byte
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		if p.FormName() == "file" {
			var b bytes.Buffer
			b.ReadFrom(p)
			gotFile = b.Bytes()
		}
	}
	if !bytes.Equal(gotFile, audio) {
		t.Fatalf("the audio file was not passed through intact (%d bytes)", len(gotFile))
	}
	if !strings.HasPrefix(resp.Text, "multipart bytes=") {
		t.Fatalf("text %q", resp.Text)
	}
}

// TestPassthrough sends unknown paths with every method and checks the
// provider's answer comes back byte for byte.
func TestPassthrough(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
		t.Run(method, func(t *testing.T) {
			var body []byte
			if method != "GET" && method != "DELETE" {
				body = []byte(`{"query":"q","documents":["a","b"],"top_n":1}`)
			}
			resp, raw := do(t, method, "/rerank/v2?x=1&y=two", body,
				"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider", "X-Custom", "kept")
			want := `{"method":"` + method + `","path":"/v1/rerank/v2","query":"x=1&y=two","body":` + jsonString(string(body)) + `}`
			if resp.StatusCode != 202 || string(raw) != want {
				t.Fatalf("got %d %s\nwant 202 %s", resp.StatusCode, raw, want)
			}
			if resp.Header.Get("X-Echo") != "yes" {
				t.Fatal("provider headers must pass through")
			}
			seen := up.last()
			if seen.Header.Get("X-Custom") != "kept" || seen.Header.Get("X-Gateway-Api-Key") != "" {
				t.Fatalf("pass-through headers wrong: %v", seen.Header)
			}
		})
	}
}

func TestAuthErrors(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	body := []byte(`{"model":"m","messages":[]}`)
	for _, tt := range []struct{ name, key string }{{"missing", ""}, {"wrong", "nope"}} {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-api-key", tt.key, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
			assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 401, "authentication_error")
		})
	}
	if up.count() != 0 {
		t.Fatal("unauthenticated requests reached the provider")
	}
	// The provider's own auth error passes through with its status and
	// without the gateway's error marker.
	resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer wrong")
	if resp.StatusCode != 401 || resp.Header.Get("x-gateway-error") != "" || !strings.Contains(string(raw), "Incorrect API key") {
		t.Fatalf("provider error: %d %q %s", resp.StatusCode, resp.Header.Get("x-gateway-error"), raw)
	}
}

func TestBadRequests(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	chat := []byte(`{"model":"m","messages":[]}`)
	tests := []struct {
		name    string
		body    []byte
		headers []string
		status  int
		msg     string
	}{
		{"no provider", chat, nil, 400, "no provider"},
		{"unknown provider", chat, []string{"x-gateway-provider", "nope"}, 400, "unknown provider"},
		{"metadata not an object", chat, []string{"x-gateway-provider", "openai", "x-gateway-metadata", "[1]"}, 400, "x-gateway-metadata"},
		{"config unknown key", chat, []string{"x-gateway-config", `{"provider":"openai","api_key":"k","colour":"red"}`}, 400, "config.colour"},
		{"config bad enum", chat, []string{"x-gateway-config", `{"strategy":{"mode":"random"},"targets":[{"provider":"openai","api_key":"k"}]}`}, 400, "config.strategy.mode"},
		{"config cooldown too short", chat, []string{"x-gateway-config", `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"k"},{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":1,"cooldown_interval":29999}}]}`}, 400, "config.targets[1].cb_config.cooldown_interval"},
		{"unknown saved config", chat, []string{"x-gateway-config", "pc-nope"}, 404, "not found"},
		{"unknown virtual key", chat, []string{"x-gateway-virtual-key", "vk-nope"}, 404, "not found"},
		{"malformed JSON body", []byte(`{"model":`), []string{"x-gateway-provider", "openai"}, 400, "JSON object"},
		{"needs custom host", chat, []string{"x-gateway-provider", "openai-compatible"}, 400, "custom_host"},
		{"bad timeout header", chat, []string{"x-gateway-provider", "openai", "x-gateway-request-timeout", "soon"}, 400, "x-gateway-request-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := append([]string{"x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}, tt.headers...)
			if tt.name == "needs custom host" || tt.name == "no provider" {
				h = tt.headers
			}
			resp, raw := do(t, "POST", "/chat/completions", tt.body, h...)
			assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, tt.status, "")
			if !strings.Contains(string(raw), tt.msg) {
				t.Fatalf("message should mention %q: %s", tt.msg, raw)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{Gateway: "custom_host_allow loopback\nmax_request_body 1KB"})
	big := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`)
	resp, raw := do(t, "POST", "/chat/completions", big, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 413, "invalid_request_error")
	if up.count() != 0 {
		t.Fatal("an oversized body reached the provider")
	}
}

func TestPortkeyAliases(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	resp, _ := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-api-key", "", "x-portkey-api-key", gatewayKey, "x-portkey-provider", "openai",
		"x-portkey-custom-host", up.URL, "Authorization", "Bearer sk-test-provider", "x-portkey-trace-id", "pk-trace")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp.Header.Get("x-portkey-trace-id") != "pk-trace" || resp.Header.Get("x-gateway-trace-id") != "pk-trace" {
		t.Fatalf("trace headers: %v", resp.Header)
	}
	if resp.Header.Get("x-portkey-provider") != "openai" {
		t.Fatalf("alias response headers missing: %v", resp.Header)
	}
}

func TestVirtualKeyAndSavedConfig(t *testing.T) {
	up := newFakeOpenAI(t)
	// {env.*} is resolved at provision (an unset one fails the load).
	t.Setenv("TEST_PROVIDER_KEY", "sk-test-provider")
	loadSite(t, site{LLM: `
		virtual_key vk-openai {
			provider openai
			api_key {env.TEST_PROVIDER_KEY}
			custom_host ` + up.URL + `
			vendor_organization org-42
			vendor_project proj-7
		}
		config pc-openai ` + "`" + `{"virtual_key":"vk-openai","override_params":{"model":"gpt-override"}}` + "`"})

	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`), "x-gateway-virtual-key", "vk-openai")
	if resp.StatusCode != 200 {
		t.Fatalf("virtual key: %d %s", resp.StatusCode, raw)
	}
	seen := up.last()
	if seen.Header.Get("OpenAI-Organization") != "org-42" || seen.Header.Get("OpenAI-Project") != "proj-7" {
		t.Fatalf("organization headers: %v", seen.Header)
	}
	resp, raw = do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`), "x-gateway-config", "pc-openai")
	if resp.StatusCode != 200 || !strings.Contains(string(up.last().Body), `"model":"gpt-override"`) {
		t.Fatalf("saved config: %d %s / upstream body %s", resp.StatusCode, raw, up.last().Body)
	}
	// The secret is never exposed through the admin API.
	cfgResp, cfgRaw := getAdmin(t, "/config/apps/llm")
	if cfgResp != 200 || strings.Contains(cfgRaw, "sk-test-provider") || !strings.Contains(cfgRaw, "{env.TEST_PROVIDER_KEY}") {
		t.Fatalf("admin config exposes secrets or lost the placeholder: %s", cfgRaw)
	}
}

func TestInvalidSavedConfigFailsLoad(t *testing.T) {
	err := tryLoad(site{LLM: "config pc-bad `" + `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"k","cb_config":{"failure_threshold":0,"cooldown_interval":30000}}]}` + "`"})
	if err == nil || !strings.Contains(err.Error(), `config "pc-bad"`) || !strings.Contains(err.Error(), "config.targets[0].cb_config.failure_threshold") {
		t.Fatalf("want a load error naming the id and the field, got %v", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	up := newFakeOpenAI(t)
	release := make(chan struct{})
	defer close(release)
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}
	loadSite(t, site{})
	start := time.Now()
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider", "x-gateway-request-timeout", "100")
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 408, "timeout_error")
	if time.Since(start) > 10*time.Second {
		t.Fatal("the timeout did not cut the request")
	}
}

func TestCustomHostPolicy(t *testing.T) {
	up := newFakeOpenAI(t)
	// Without custom_host_allow, a custom host may not reach loopback.
	loadSite(t, site{Gateway: "max_request_body 1MB"})
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 400, "invalid_request_error")
	if up.count() != 0 {
		t.Fatal("a blocked custom host was reached")
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	loadSite(t, site{})
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", "http://127.0.0.1:"+itoa(freePort()), "Authorization", "Bearer sk-test-provider")
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 502, "upstream_error")
}

func assertGatewayError(t *testing.T, status int, marker string, raw []byte, wantStatus int, wantType string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d: %s", status, wantStatus, raw)
	}
	if marker != "true" {
		t.Fatalf("gateway errors carry x-gateway-error: true (got %q)", marker)
	}
	var env struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Message == "" {
		t.Fatalf("not an OpenAI error envelope: %s", raw)
	}
	if wantType != "" && env.Error.Type != wantType {
		t.Fatalf("type %q, want %q", env.Error.Type, wantType)
	}
}

func asOpenAIError(err error, target **openai.Error) bool {
	e, ok := err.(*openai.Error)
	if ok {
		*target = e
	}
	return ok
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestSpecProviderAliases: the spec's neutral word for OpenAI works as a
// provider slug.
func TestSpecProviderAliases(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[]}`),
		"x-gateway-provider", "vendor", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 || up.last().Path != "/v1/chat/completions" {
		t.Fatalf("vendor alias: %d %s", resp.StatusCode, raw)
	}
}
