package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// createdKey is the answer to POST /v1/api-keys/{type}/{sub_type}.
type createdKey struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Object string `json:"object"`
}

// keyRecord is the answer to GET /v1/api-keys/{id}.
type keyRecord struct {
	ID            string   `json:"id"`
	Key           string   `json:"key"`
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	WorkspaceID   string   `json:"workspace_id"`
	Status        string   `json:"status"`
	Scopes        []string `json:"scopes"`
	AllowedModels []string `json:"allowed_models"`
	Source        string   `json:"source"`
	Defaults      struct {
		VirtualKey string `json:"virtual_key"`
	} `json:"defaults"`
}

// vkOpenAI is a Caddyfile virtual key reaching the fake OpenAI.
func vkOpenAI(name, url string) string {
	return fmt.Sprintf("virtual_key %s {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}\n\t\t", name, url)
}

// TestKeysLifecycle drives a gateway key through the API with the
// portkey-ai SDK's paths and bodies: created (shown once), listed and
// read masked, used as a plain Bearer token with its default virtual key
// and model allow-list, disabled, rotated with a transition period and an
// idempotent replay, revoked; every change is in the audit log and no
// stored file holds a key.
func TestKeysLifecycle(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	s.load(t)

	// The node SDK's apiKeys.create sends type and sub-type in the body too.
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"type":"workspace","sub-type":"service","name":"team-a","description":"CI","workspace_id":"`+keysWorkspace+`","scopes":["completions.write","virtual_keys.list"],"rate_limits":[{"type":"requests","unit":"rpm","value":100}],"usage_limits":{"credit_limit":10,"periodic_reset":"monthly"},"defaults":{"virtual_key":"openai","metadata":{"team":"a"}},"allowed_models":["gpt-4o*"]}`,
		200, &created)
	if !strings.HasPrefix(created.Key, "gw-") || created.ID == "" || created.Object != "api-key" {
		t.Fatalf("created %+v", created)
	}
	key := created.Key

	// Read and list: masked, never the key.
	var rec keyRecord
	raw := as(t, keysAdminKey, "GET", "/api-keys/"+created.ID, "", 200, &rec)
	if strings.Contains(string(raw), key) || rec.Key != key[:7]+"****" || rec.Type != "workspace-service" || rec.Status != "active" || rec.Defaults.VirtualKey != "openai" {
		t.Fatalf("GET: %s", raw)
	}
	var page struct {
		Total int         `json:"total"`
		Data  []keyRecord `json:"data"`
	}
	raw = as(t, keysAdminKey, "GET", "/api-keys?workspace_id="+keysWorkspace+"&page_size=50&current_page=0", "", 200, &page)
	if strings.Contains(string(raw), key) || strings.Contains(string(raw), gatewayKey) || strings.Contains(string(raw), keysAdminKey) {
		t.Fatal("a list holds a key")
	}
	sources := map[string]string{}
	for _, k := range page.Data {
		sources[k.Name] = k.Source
	}
	if sources["team-a"] != "api" || sources["admin"] != "config" || sources["test"] != "config" || page.Total != 3 {
		t.Fatalf("list: %s", raw)
	}

	// A plain OpenAI client: only the base URL and the key as Bearer.
	bearer := func(model string, want int) []byte {
		t.Helper()
		return call(t, "POST", "/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, want, nil,
			"x-gateway-api-key", "", "Authorization", "Bearer "+key)
	}
	bearer("gpt-4o-mini", 200)
	seen := up.last()
	if seen.Header.Get("Authorization") != "Bearer sk-test-provider" {
		t.Fatalf("the provider got Authorization %q, not the virtual key's", seen.Header.Get("Authorization"))
	}
	raw = bearer("o3", 403)
	if errCode(t, raw) != "model_not_allowed" || !strings.Contains(string(raw), "o3") {
		t.Fatalf("o3: %s", raw)
	}
	// The same key in x-gateway-api-key, with a provider key in
	// Authorization, keeps working as before.
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 200, nil,
		"x-gateway-api-key", key, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")

	// Disabled, then active again.
	as(t, keysAdminKey, "PUT", "/api-keys/"+created.ID, `{"status":"disabled"}`, 200, nil)
	if c := errCode(t, bearer("gpt-4o-mini", 401)); c != "api_key_disabled" {
		t.Fatalf("disabled: %s", c)
	}
	as(t, keysAdminKey, "PUT", "/api-keys/"+created.ID, `{"status":"active","name":"team-a2"}`, 200, nil)
	bearer("gpt-4o-mini", 200)

	// Rotation with a transition period, replayed with the same
	// Idempotency-Key: the same new key, nothing rotated again.
	var rot struct {
		ID, Key                string
		KeyTransitionExpiresAt time.Time `json:"key_transition_expires_at"`
	}
	as(t, keysAdminKey, "POST", "/api-keys/"+created.ID+"/rotate", `{"key_transition_period_ms":3600000}`, 200, &rot, "Idempotency-Key", "rot-1")
	var replay struct{ Key string }
	as(t, keysAdminKey, "POST", "/api-keys/"+created.ID+"/rotate", `{"key_transition_period_ms":3600000}`, 200, &replay, "Idempotency-Key", "rot-1")
	if rot.Key == key || replay.Key != rot.Key || time.Until(rot.KeyTransitionExpiresAt) < 59*time.Minute {
		t.Fatalf("rotate %+v replay %q", rot, replay.Key)
	}
	bearer("gpt-4o-mini", 200) // the old key, in its transition period
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 200, nil, "x-gateway-api-key", "", "Authorization", "Bearer "+rot.Key)
	// A rotation without transition period ends the old key at once.
	var rot2 struct{ Key string }
	as(t, keysAdminKey, "POST", "/api-keys/"+created.ID+"/rotate", `{"key_transition_period_ms":0}`, 200, &rot2, "Idempotency-Key", "rot-2")
	raw = call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, 401, nil, "x-gateway-api-key", "", "Authorization", "Bearer "+rot.Key)
	if errCode(t, raw) != "api_key_rotated" {
		t.Fatalf("rotated out: %s", raw)
	}

	// Revoked: 401 api_key_revoked at once.
	as(t, keysAdminKey, "DELETE", "/api-keys/"+created.ID, "", 200, nil)
	raw = call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, 401, nil, "x-gateway-api-key", rot2.Key)
	if errCode(t, raw) != "api_key_revoked" {
		t.Fatalf("revoked: %s", raw)
	}

	// Expiry: a key whose expires_at passes is refused with its own code.
	var short createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/user", `{"name":"short","user_id":"u1","scopes":["completions.write"],"expires_at":"`+time.Now().Add(1500*time.Millisecond).UTC().Format(time.RFC3339Nano)+`"}`, 200, &short)
	for {
		resp, raw := doRetry(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, "x-gateway-api-key", short.Key, "x-gateway-virtual-key", "openai")
		if resp.StatusCode == 401 {
			if errCode(t, raw) != "api_key_expired" {
				t.Fatalf("expired: %s", raw)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The audit log: every change, by key id and field names, no secret.
	var audit struct {
		Data []struct {
			Action        string   `json:"action"`
			ResourceID    string   `json:"resource_id"`
			ActorKeyID    string   `json:"actor_key_id"`
			ChangedFields []string `json:"changed_fields"`
		} `json:"data"`
	}
	raw = as(t, keysAdminKey, "GET", "/audit-logs?limit=100", "", 200, &audit)
	var actions []string
	for _, e := range audit.Data {
		if e.ResourceID == created.ID {
			actions = append(actions, e.Action)
		}
	}
	if strings.Join(actions, ",") != "api_key.delete,api_key.rotate,api_key.rotate,api_key.update,api_key.update,api_key.create" {
		t.Fatalf("audit actions %v", actions)
	}
	for _, secret := range []string{key, rot.Key, rot2.Key, short.Key, keysAdminKey, "rot-1"} {
		if strings.Contains(string(raw), secret) {
			t.Fatal("the audit log holds a secret")
		}
	}
	grepStore(t, s.Storage, key, rot.Key, rot2.Key, short.Key, "rot-1", "rot-2")
	logs := readLog(t)
	for _, secret := range []string{key, rot.Key, rot2.Key, short.Key} {
		if strings.Contains(logs, secret) {
			t.Fatal("the gateway's log holds a key")
		}
	}
}

// TestKeysAllowListThroughConfig: a model a config's override_params
// sends is checked against the key's allow-list too; the provider is
// never called with it.
func TestKeysAllowListThroughConfig(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL)+`config to-o3 {"virtual_key":"openai","override_params":{"model":"o3"}}`)
	s.load(t)
	var k createdKey
	as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"4o-only","scopes":["completions.write"],"allowed_models":["gpt-4o*"],"defaults":{"config_id":"to-o3"}}`, 200, &k)
	raw := call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 403, nil, "x-gateway-api-key", k.Key)
	if errCode(t, raw) != "model_not_allowed" || !strings.Contains(string(raw), "o3") || up.count() != 0 {
		t.Fatalf("%s, %d upstream calls", raw, up.count())
	}
	// Through the virtual key (no override) the model is allowed.
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 200, nil, "x-gateway-api-key", k.Key, "x-gateway-virtual-key", "openai")
}

// TestKeysScopes: a workspace key sees and changes only its workspace's
// keys and cannot create an organisation key or grant a scope it lacks; a
// key without a scope is refused the API; an organisation key reaches
// every workspace of its organisation.
func TestKeysScopes(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	var other createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"other-ws","workspace_id":"`+keysOtherWS+`","scopes":["api_keys.read","api_keys.create"]}`, 200, &other)
	var orgKey createdKey
	as(t, keysAdminKey, "POST", "/api-keys/organisation/service", `{"name":"org-2","scopes":["api_keys.read"]}`, 200, &orgKey)
	var narrow createdKey
	as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"narrow","scopes":["completions.write"]}`, 200, &narrow)
	testID := configKeyID(t, "test")

	tests := []struct {
		name, key, method, path, body string
		status                        int
		code                          string
	}{
		{"workspace key lists another workspace", gatewayKey, "GET", "/api-keys?workspace_id=" + keysOtherWS, "", 403, "workspace_forbidden"},
		{"workspace key reads another workspace's key", gatewayKey, "GET", "/api-keys/" + other.ID, "", 404, ""},
		{"workspace key revokes another workspace's key", gatewayKey, "DELETE", "/api-keys/" + other.ID, "", 404, ""},
		{"workspace key creates an organisation key", gatewayKey, "POST", "/api-keys/organisation/service", `{"name":"x","scopes":["api_keys.read"]}`, 403, "workspace_forbidden"},
		{"workspace key creates in another workspace", other.Key, "POST", "/api-keys/workspace/service", `{"name":"x","workspace_id":"` + keysWorkspace + `","scopes":["api_keys.read"]}`, 403, "workspace_forbidden"},
		{"grant a scope not held", other.Key, "POST", "/api-keys/workspace/service", `{"name":"x","scopes":["api_keys.delete"]}`, 403, "missing_scope"},
		{"no scope to list", narrow.Key, "GET", "/api-keys", "", 403, "missing_scope"},
		{"no scope for configs", narrow.Key, "GET", "/configs", "", 403, "missing_scope"},
		{"unknown scope", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"x","scopes":["nope"]}`, 400, ""},
		{"no scopes", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"x"}`, 400, ""},
		{"bad type", gatewayKey, "POST", "/api-keys/team/service", `{"name":"x","scopes":["api_keys.read"]}`, 400, ""},
		{"bad expiry", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"x","scopes":["api_keys.read"],"expires_at":"2001-01-01T00:00:00Z"}`, 400, ""},
		{"bad glob", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"x","scopes":["api_keys.read"],"allowed_models":["gpt-["]}`, 400, ""},
		{"unknown default virtual key", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"x","scopes":["api_keys.read"],"defaults":{"virtual_key":"nope"}}`, 400, ""},
		{"name of a Caddyfile key", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"admin","scopes":["api_keys.read"]}`, 409, "declared_in_caddyfile"},
		{"Caddyfile key is read-only", keysAdminKey, "PUT", "/api-keys/" + testID, `{"name":"y"}`, 409, "declared_in_caddyfile"},
		{"Caddyfile key cannot be revoked", keysAdminKey, "DELETE", "/api-keys/" + testID, "", 409, "declared_in_caddyfile"},
		{"body not an object", gatewayKey, "POST", "/api-keys/workspace/service", `[1]`, 400, ""},
		{"oversized rate limits", gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"x","scopes":["api_keys.read"],"rate_limits":[` + strings.Repeat(`{"a":1},`, 3000) + `{}]}`, 400, ""},
		{"organisation key reads another workspace", orgKey.Key, "GET", "/api-keys/" + other.ID, "", 200, ""},
		{"workspace key reads its own", other.Key, "GET", "/api-keys/" + other.ID, "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := as(t, tt.key, tt.method, tt.path, tt.body, tt.status, nil)
			if tt.code != "" && errCode(t, raw) != tt.code {
				t.Fatalf("code %s: %s", errCode(t, raw), raw)
			}
		})
	}
	// A workspace key's list holds only its workspace's keys.
	var page struct {
		Data []keyRecord `json:"data"`
	}
	as(t, other.Key, "GET", "/api-keys", "", 200, &page)
	if len(page.Data) != 1 || page.Data[0].ID != other.ID {
		t.Fatalf("workspace list: %+v", page.Data)
	}
	// Cursor paging over the organisation's keys.
	var p1, p2 struct {
		Data    []keyRecord `json:"data"`
		HasMore bool        `json:"has_more"`
		LastID  string      `json:"last_id"`
	}
	as(t, keysAdminKey, "GET", "/api-keys?page_size=1&after=00000000-0000-0000-0000-000000000000", "", 200, &p1)
	as(t, keysAdminKey, "GET", "/api-keys?page_size=1&after="+p1.LastID, "", 200, &p2)
	if len(p1.Data) != 1 || !p1.HasMore || len(p2.Data) != 1 || p2.Data[0].ID == p1.Data[0].ID {
		t.Fatalf("cursor pages %+v %+v", p1, p2)
	}
}

// configKeyID is the id the API lists a Caddyfile key under.
func configKeyID(t *testing.T, name string) string {
	t.Helper()
	var page struct {
		Data []keyRecord `json:"data"`
	}
	as(t, keysAdminKey, "GET", "/api-keys", "", 200, &page)
	for _, k := range page.Data {
		if k.Name == name && k.Source == "config" {
			return k.ID
		}
	}
	t.Fatalf("no Caddyfile key %s listed", name)
	return ""
}
