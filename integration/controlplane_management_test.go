package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// managementSites is a public gateway site with management off and an
// internal site on its own listener serving the management API with
// llm_api; it returns the internal site's base URL (with /v1).
func managementSites(t *testing.T, up *fakeOpenAI) string {
	t.Helper()
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	newHTTPPort()
	internal := freePort()
	cf := strings.Replace(s.caddyfile(), "custom_host_allow loopback", "custom_host_allow loopback\n\t\t\tmanagement off", 1)
	cf += fmt.Sprintf("\nhttp://127.0.0.1:%d {\n\tllm_api\n}\n", internal)
	cfg, err := adapt(cf)
	if err != nil {
		t.Fatalf("adapting: %v\n%s", err, cf)
	}
	truncateLog()
	err = caddy.Load(cfg, true)
	http.DefaultClient.CloseIdleConnections()
	if err != nil {
		t.Fatalf("loading: %v\n%s", err, cf)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/v1", internal)
}

// internalCall sends a management call to the internal site.
func internalCall(t *testing.T, base, key, method, path, body string, want int, out any) []byte {
	t.Helper()
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-gateway-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, buf.Bytes())
	}
	if want >= 400 && resp.Header.Get("x-gateway-error") != "true" {
		t.Fatalf("%s %s: not the gateway's error envelope", method, path)
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			t.Fatalf("decoding %s: %v", buf.Bytes(), err)
		}
	}
	return buf.Bytes()
}

// TestManagementOnItsOwnSite: the management API on an internal listener
// (llm_api) and a public gateway with management off. A key created on
// the internal site authenticates on the public one through the OpenAI
// SDK; the public site answers the management paths 404 itself and
// nothing of them reaches the provider; the internal site serves no
// inference.
func TestManagementOnItsOwnSite(t *testing.T) {
	up := newFakeOpenAI(t)
	internal := managementSites(t, up)

	// Created internally, with the portkey SDK's path and body.
	var created createdKey
	internalCall(t, internal, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"name":"svc","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"defaults":{"virtual_key":"openai"}}`, 200, &created)
	if !strings.HasPrefix(created.Key, "gw-") {
		t.Fatalf("created %+v", created)
	}
	var rec keyRecord
	internalCall(t, internal, keysAdminKey, "GET", "/api-keys/"+created.ID, "", 200, &rec)
	if rec.Name != "svc" || rec.Status != "active" {
		t.Fatalf("read %+v", rec)
	}
	// The internal site authenticates as llm_gateway does.
	if raw := internalCall(t, internal, "not-a-key", "GET", "/api-keys", "", 401, nil); errCode(t, raw) != "invalid_api_key" {
		t.Fatalf("unknown key: %s", raw)
	}
	// The new key lacks api_keys scopes: scope first.
	if raw := internalCall(t, internal, created.Key, "GET", "/api-keys/00000000-0000-0000-0000-000000000000", "", 403, nil); errCode(t, raw) != "missing_scope" {
		t.Fatalf("scope: %s", raw)
	}
	// Inference is not the internal site's.
	internalCall(t, internal, created.Key, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, 404, nil)

	// The public site: the new key works through the OpenAI SDK.
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(created.Key),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini")); err != nil {
		t.Fatalf("chat with the new key: %v", err)
	}
	before := up.count()
	// Management paths are a 404 there, with a provider named too.
	public := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey("sk-test-provider"),
		option.WithHeader("x-gateway-api-key", keysAdminKey), option.WithHeader("x-gateway-provider", "openai"),
		option.WithHeader("x-gateway-custom-host", up.URL), option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	for _, tc := range []struct{ method, path string }{
		{"GET", "api-keys"}, {"GET", "api-keys/" + created.ID}, {"POST", "api-keys/workspace/service"},
		{"GET", "virtual-keys"}, {"GET", "configs"}, {"GET", "prompts"}, {"GET", "policies/rate-limits"},
		{"GET", "policies/usage-limits"}, {"GET", "logs"}, {"GET", "analytics/graphs/requests"},
		{"POST", "feedback"}, {"GET", "audit-logs"}, {"GET", "labels"},
	} {
		var httpResp *http.Response
		err := public.Execute(context.Background(), tc.method, tc.path, map[string]any{"name": "x"}, nil, option.WithResponseInto(&httpResp))
		var apiErr *openai.Error
		if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != 404 || httpResp.Header.Get("x-gateway-error") != "true" {
			t.Fatalf("public %s %s: want the gateway's 404, got %v", tc.method, tc.path, err)
		}
	}
	if n := up.count(); n != before {
		t.Fatalf("%d management calls reached the provider", n-before)
	}
}

// TestManagementOff: a gateway route with management off answers the
// management API's paths 404 and keeps serving inference; without the
// option the same call is answered (default on: nothing breaks).
func TestManagementOff(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{Gateway: "custom_host_allow loopback\n\t\t\tmanagement off"})
	raw := call(t, "GET", "/policies/rate-limits", "", 404, nil)
	if !strings.Contains(string(raw), "unknown endpoint") {
		t.Fatalf("management off: %s", raw)
	}
	call(t, "POST", "/feedback", `{"trace_id":"t","value":1}`, 404, nil, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	if n := up.count(); n != 0 {
		t.Fatalf("%d management calls reached the provider", n)
	}
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	loadSite(t, site{})
	call(t, "GET", "/policies/rate-limits", "", 200, nil)
}
