package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// TestKeysVirtualKeysAndConfigs: virtual keys and configs through the
// API in the SDK's shapes; the provider key is sealed (never returned,
// never in a stored file), configs are validated like the header and
// keep versions, the Caddyfile's records are listed read-only and win,
// and API records survive a reload and a restart on the same storage.
func TestKeysVirtualKeysAndConfigs(t *testing.T) {
	up := newFakeOpenAI(t)
	const providerKey = "sk-proj-SECRET-provider-key-9f8e7d"
	s := newKeysSite(t, vkOpenAI("openai", up.URL)+`config shared {"virtual_key":"openai"}`)
	s.NoEncryption = true
	s.load(t)
	raw := as(t, gatewayKey, "POST", "/virtual-keys", `{"name":"Team OpenAI","provider":"openai","key":"`+providerKey+`"}`, 400, nil)
	if errCode(t, raw) != "encryption_key_not_configured" {
		t.Fatalf("without an encryption key: %s", raw)
	}

	s.NoEncryption = false
	s.load(t)
	var vk struct{ ID, Slug, Object string }
	as(t, gatewayKey, "POST", "/virtual-keys", `{"name":"Team OpenAI","provider":"openai","key":"`+providerKey+`","note":"n","usage_limits":{"credit_limit":5},"rate_limits":[{"type":"requests","unit":"rpm","value":10}]}`, 200, &vk)
	if vk.Slug != "team-openai" || vk.Object != "virtual-key" {
		t.Fatalf("created %+v", vk)
	}
	for _, path := range []string{"/virtual-keys/" + vk.Slug, "/virtual-keys"} {
		raw := as(t, gatewayKey, "GET", path, "", 200, nil)
		if strings.Contains(string(raw), providerKey) || strings.Contains(string(raw), "sk-test-provider") {
			t.Fatalf("%s returns a provider key: %s", path, raw)
		}
		if path == "/virtual-keys" && (!strings.Contains(string(raw), `"source":"config"`) || !strings.Contains(string(raw), `"slug":"openai"`)) {
			t.Fatalf("the Caddyfile's virtual key is not listed: %s", raw)
		}
	}
	var got struct {
		MaskedAPIKey string `json:"masked_api_key"`
		Provider     string `json:"ai_provider_name"`
	}
	as(t, gatewayKey, "GET", "/virtual-keys/"+vk.Slug, "", 200, &got)
	if got.MaskedAPIKey != "sk****7d" || got.Provider != "openai" {
		t.Fatalf("view %+v", got)
	}

	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"custom host refused", "POST", "/virtual-keys", `{"name":"x","provider":"openai","key":"k","custom_host":"http://10.0.0.1"}`, 400, ""},
		{"unknown provider", "POST", "/virtual-keys", `{"name":"x","provider":"nope","key":"k"}`, 400, ""},
		{"unknown field", "POST", "/virtual-keys", `{"name":"x","provider":"openai","key":"k","colour":"red"}`, 400, ""},
		{"taken slug", "POST", "/virtual-keys", `{"name":"x","slug":"team-openai","provider":"openai","key":"k"}`, 409, "slug_taken"},
		{"Caddyfile slug", "POST", "/virtual-keys", `{"name":"x","slug":"openai","provider":"openai","key":"k"}`, 409, "declared_in_caddyfile"},
		{"Caddyfile virtual key read-only", "PUT", "/virtual-keys/openai", `{"note":"x"}`, 409, "declared_in_caddyfile"},
		{"Caddyfile config read-only", "DELETE", "/configs/shared", "", 409, "declared_in_caddyfile"},
		{"invalid config", "POST", "/configs", `{"name":"bad","config":{"strategy":{"mode":"nope"},"targets":[]}}`, 400, ""},
		{"config naming an unknown virtual key", "POST", "/configs", `{"name":"bad","config":{"virtual_key":"nope"}}`, 400, ""},
		{"config with a custom host", "POST", "/configs", `{"name":"bad","config":{"provider":"openai","custom_host":"http://169.254.169.254"}}`, 400, ""},
		{"unknown config", "GET", "/configs/nope", "", 404, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := as(t, gatewayKey, tt.method, tt.path, tt.body, tt.status, nil)
			if tt.code != "" && errCode(t, raw) != tt.code {
				t.Fatalf("code: %s", raw)
			}
		})
	}

	// A config naming the workspace's API virtual key and the Caddyfile's.
	var cfg struct{ ID, Slug, VersionID string }
	as(t, gatewayKey, "POST", "/configs", `{"name":"Fallback","config":{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"team-openai"},{"virtual_key":"openai"}]}}`, 200, &cfg)
	var upd struct {
		VersionID string `json:"version_id"`
	}
	as(t, gatewayKey, "PUT", "/configs/"+cfg.Slug, `{"config":{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"team-openai","override_params":{"model":"gpt-4o-mini"}},{"virtual_key":"openai"}]}}`, 200, &upd)
	var versions struct {
		Total int `json:"total"`
	}
	as(t, gatewayKey, "GET", "/configs/"+cfg.Slug+"/versions", "", 200, &versions)
	if versions.Total != 2 || upd.VersionID == cfg.VersionID {
		t.Fatalf("versions %d", versions.Total)
	}
	// The config routes: the API virtual key's sealed key reaches the
	// fake (which refuses it), the fallback the Caddyfile's key. An API
	// virtual key has no custom_host of its own, so the client's header
	// points it at the fake.
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 200, nil, "x-gateway-config", cfg.Slug, "x-gateway-custom-host", up.URL)
	if up.count() != 2 || up.seen[0].Header.Get("Authorization") != "Bearer "+providerKey {
		t.Fatalf("upstream saw %d requests", up.count())
	}
	// Rotating the provider key: the next request sends the new one; a
	// retry with the same Idempotency-Key changes nothing again.
	const newProviderKey = "sk-proj-SECRET-rotated-key-1a2b3c"
	as(t, gatewayKey, "POST", "/virtual-keys/"+vk.Slug+"/rotate", `{"key":"`+newProviderKey+`"}`, 200, nil, "Idempotency-Key", "vk-rot-1")
	as(t, gatewayKey, "POST", "/virtual-keys/"+vk.Slug+"/rotate", `{"key":"`+newProviderKey+`"}`, 200, nil, "Idempotency-Key", "vk-rot-1")
	doRetry(t, "POST", "/chat/completions", `{"model":"gpt-4o","messages":[]}`, "x-gateway-virtual-key", vk.Slug, "x-gateway-custom-host", up.URL)
	if got := up.last().Header.Get("Authorization"); got != "Bearer "+newProviderKey {
		t.Fatal("the rotated provider key is not used")
	}
	var audit struct {
		Data []struct{ Action string } `json:"data"`
	}
	raw = as(t, gatewayKey, "GET", "/audit-logs", "", 200, &audit)
	var actions []string
	for _, e := range audit.Data {
		actions = append(actions, e.Action)
	}
	if strings.Join(actions, ",") != "virtual_key.rotate,config.update,config.create,virtual_key.create" ||
		strings.Contains(string(raw), providerKey) || strings.Contains(string(raw), newProviderKey) {
		t.Fatalf("audit log %v", actions)
	}

	// Another workspace does not see the config or the virtual key.
	var other createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"other","workspace_id":"`+keysOtherWS+`","scopes":["completions.write","configs.read","virtual_keys.read"]}`, 200, &other)
	as(t, other.Key, "GET", "/configs/"+cfg.Slug, "", 404, nil)
	as(t, other.Key, "GET", "/virtual-keys/"+vk.Slug, "", 404, nil)
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o","messages":[]}`, 404, nil, "x-gateway-api-key", other.Key, "x-gateway-config", cfg.Slug)
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o","messages":[]}`, 404, nil, "x-gateway-api-key", other.Key, "x-gateway-virtual-key", vk.Slug)

	// The node SDK's configs.delete names a config by id.
	var tmp struct{ ID string }
	as(t, gatewayKey, "POST", "/configs", `{"name":"tmp","config":{"virtual_key":"openai"}}`, 200, &tmp)
	as(t, other.Key, "DELETE", "/configs/"+tmp.ID, "", 403, nil)
	as(t, gatewayKey, "DELETE", "/configs/"+tmp.ID, "", 200, nil)
	as(t, gatewayKey, "GET", "/configs/"+tmp.ID, "", 404, nil)

	// A reload (the Caddyfile now also declares "team-openai") keeps the
	// API records, and the Caddyfile's record of the same name wins.
	s.LLM = vkOpenAI("openai", up.URL) + vkOpenAI("team-openai", up.URL) + `config shared {"virtual_key":"openai"}`
	s.load(t)
	var after struct {
		Source string `json:"source"`
	}
	as(t, gatewayKey, "GET", "/virtual-keys/team-openai", "", 200, &after)
	if after.Source != "config" {
		t.Fatalf("the Caddyfile's virtual key does not win: %+v", after)
	}
	as(t, gatewayKey, "GET", "/configs/"+cfg.Slug, "", 200, nil)
	// A restart: a fresh store over the same storage (as a new process
	// opens it) reads every record back, and the key still authenticates.
	st := reopenStore(t, s.Storage)
	if c, ok := st.Config(keysWorkspace, cfg.Slug); !ok || len(c.Versions) != 2 {
		t.Fatal("the config is not in storage")
	}
	if v, ok := st.VirtualKey(keysWorkspace, vk.Slug); !ok || v.APIKey != newProviderKey {
		t.Fatal("the virtual key does not open from storage")
	}
	if _, _, res := st.Lookup(other.Key); res != keys.Valid {
		t.Fatalf("the key does not authenticate from storage: %v", res)
	}
	grepStore(t, s.Storage, providerKey, newProviderKey, other.Key, "vk-rot-1")
	if logs := readLog(t); strings.Contains(logs, providerKey) || strings.Contains(logs, newProviderKey) || strings.Contains(logs, other.Key) {
		t.Fatal("the gateway's log holds a key")
	}
}

// reopenStore opens the gateway's record store in dir afresh, with the
// server secret it keeps there and the test encryption key.
func reopenStore(t *testing.T, dir string) *keys.Store {
	t.Helper()
	opts := keys.Options{KV: &certmagic.FileStorage{Path: dir}}
	secret, err := keys.LoadOrCreateSecret(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Hasher, err = keys.NewHasher(secret); err != nil {
		t.Fatal(err)
	}
	enc, _ := keys.ParseEncryptionKey(keysEncryptionKey)
	if opts.Sealer, err = keys.NewSealer(enc); err != nil {
		t.Fatal(err)
	}
	st, err := keys.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestKeysPlainOpenAIClient: the official OpenAI SDK with only base_url
// and api_key (a gateway key) does chat, streams, tools, embeddings and
// Responses: one key's default is a fallback config whose first target
// fails, another's a virtual key of a translated provider.
func TestKeysPlainOpenAIClient(t *testing.T) {
	up := newFakeOpenAI(t)
	broken := newFakeOpenAI(t)
	broken.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusServiceUnavailable)
		return true
	}
	claude := responsesAnthropic(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL)+vkOpenAI("broken", broken.URL)+
		fmt.Sprintf("virtual_key claude {\n\t\t\tprovider anthropic\n\t\t\tapi_key %s\n\t\t\tcustom_host %s\n\t\t}\n\t\t", anthropicKey, claude.URL))
	s.load(t)
	var cfg struct{ Slug string }
	as(t, gatewayKey, "POST", "/configs", `{"name":"fallback","config":{"strategy":{"mode":"fallback","on_status_codes":[503]},"targets":[{"virtual_key":"broken"},{"virtual_key":"openai"}]}}`, 200, &cfg)
	var viaConfig, viaClaude createdKey
	as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"app","scopes":["completions.write"],"defaults":{"config_id":"`+cfg.Slug+`"}}`, 200, &viaConfig)
	as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"claude-app","scopes":["completions.write"],"defaults":{"virtual_key":"claude"}}`, 200, &viaClaude)

	plain := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	ctx := context.Background()
	client := plain(viaConfig.Key)
	chat, err := client.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"))
	if err != nil || chat.Choices[0].Message.Content != "Hello!" {
		t.Fatalf("chat: %v", err)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("gpt-4o-mini"))
	var text string
	for stream.Next() {
		if len(stream.Current().Choices) > 0 {
			text += stream.Current().Choices[0].Delta.Content
		}
	}
	if stream.Err() != nil || text != "Hello!" {
		t.Fatalf("stream: %q %v", text, stream.Err())
	}
	tools := chatParams("gpt-4o-mini")
	tools.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"},
	})}
	if _, err := client.Chat.Completions.New(ctx, tools); err != nil {
		t.Fatalf("tools: %v", err)
	}
	if !strings.Contains(string(up.last().Body), "get_weather") {
		t.Fatal("the tools did not reach the provider")
	}
	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfString: param.NewOpt("hi")}})
	if err != nil || len(emb.Data) != 1 {
		t.Fatalf("embeddings: %v", err)
	}
	if broken.count() == 0 {
		t.Fatal("the config's first target was never tried")
	}
	for _, r := range up.seen {
		if r.Header.Get("Authorization") != "Bearer sk-test-provider" {
			t.Fatal("the gateway key reached the provider")
		}
	}

	claudeClient := plain(viaClaude.Key)
	resp, err := claudeClient.Responses.New(ctx, responses.ResponseNewParams{
		Model: "claude-sonnet-4-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil || resp.OutputText() == "" {
		t.Fatalf("responses: %v", err)
	}
}
