package integration

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Issue 34, tenancy and privilege: each test reproduces one finding
// through a real Caddy. Two organisations share the gateway: keysOrg
// (keysAdminKey, the test key) and o2Org, whose Caddyfile admin o2Admin
// knows keysOrg's workspace ids.
const (
	o2Admin = "test-o2-admin-key-0123456789abcdef"
	o2Org   = "3e9c6ba3-6f7d-4d8c-8d84-9caa0d4b5e04"
	o2WS    = "4fad7cb4-708e-4e9d-9e95-abbb1e5c6f05"
	// Secrets a Caddyfile config holds: a provider key and a webhook's
	// Authorization header.
	caddyfileCfgKey  = "sk-caddyfile-SECRET-provider-1a2b"
	caddyfileHookKey = "hook-SECRET-header-3c4d"
)

// tenancySite is keysSite with o2Admin, a Caddyfile virtual key and a
// Caddyfile config holding a provider key and a webhook header.
func tenancySite(t *testing.T, upURL string) *keysSite {
	t.Helper()
	os.Setenv("TEST_KEYS_O2_ADMIN", o2Admin)
	return newKeysSite(t, `api_key o2admin {env.TEST_KEYS_O2_ADMIN} {
			organisation_id `+o2Org+`
			workspace_id `+o2WS+`
			type organisation
			scopes *
		}
		`+vkOpenAI("openai", upURL)+
		`config leaky {"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"`+caddyfileCfgKey+`","custom_host":"`+upURL+`"},{"virtual_key":"openai"}],"before_request_hooks":[{"id":"wh","checks":[{"id":"default.webhook","parameters":{"webhookURL":"http://127.0.0.1:9/hook","headers":{"x-hook-token":"`+caddyfileHookKey+`"}}}]}]}
		`)
}

// wsKey creates an API key of keysOrg in workspace ws with body members
// extra (a JSON fragment after the name) and returns it.
func wsKey(t *testing.T, creator, ws, name, extra string) createdKey {
	t.Helper()
	var k createdKey
	as(t, creator, "POST", "/api-keys/workspace/service", `{"name":"`+name+`","workspace_id":"`+ws+`",`+extra+`}`, 200, &k)
	return k
}

// TestTenancyOtherOrganisationUnreachable: an organisation admin of o2Org
// naming a workspace of keysOrg (in a body or a query) neither reads,
// lists, creates, spends through nor deletes anything there: a named
// workspace of another organisation is 403 workspace_forbidden, a record
// of it named by id a 404, as if absent.
func TestTenancyOtherOrganisationUnreachable(t *testing.T) {
	up := newFakeOpenAI(t)
	s := tenancySite(t, up.URL)
	s.load(t)
	// keysOrg's records in its workspace keysOtherWS.
	var vk, cfg struct{ ID, Slug string }
	as(t, keysAdminKey, "POST", "/virtual-keys", `{"name":"o1-vk","workspace_id":"`+keysOtherWS+`","provider":"openai","key":"sk-o1-provider-key-000000"}`, 200, &vk)
	as(t, keysAdminKey, "POST", "/configs", `{"name":"o1-cfg","workspace_id":"`+keysOtherWS+`","config":{"virtual_key":"openai"}}`, 200, &cfg)
	o1 := wsKey(t, keysAdminKey, keysOtherWS, "o1-key", `"scopes":["completions.write"]`)
	wsq := "?workspace_id=" + keysOtherWS

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"lists the workspace's keys", "GET", "/api-keys" + wsq, "", 403, "workspace_forbidden"},
		{"lists the workspace's virtual keys", "GET", "/virtual-keys" + wsq, "", 403, "workspace_forbidden"},
		{"lists the workspace's configs", "GET", "/configs" + wsq, "", 403, "workspace_forbidden"},
		{"lists the workspace's audit log", "GET", "/audit-logs" + wsq, "", 403, "workspace_forbidden"},
		{"reads a virtual key", "GET", "/virtual-keys/" + vk.Slug + wsq, "", 403, "workspace_forbidden"},
		{"reads a config", "GET", "/configs/" + cfg.Slug + wsq, "", 403, "workspace_forbidden"},
		{"reads a config by id", "GET", "/configs/" + cfg.ID, "", 404, ""},
		{"reads a key by id", "GET", "/api-keys/" + o1.ID, "", 404, ""},
		{"rotates a key by id", "POST", "/api-keys/" + o1.ID + "/rotate", "{}", 404, ""},
		{"creates a key there", "POST", "/api-keys/workspace/service", `{"name":"intruder","workspace_id":"` + keysOtherWS + `","scopes":["completions.write"]}`, 403, "workspace_forbidden"},
		{"creates a virtual key there", "POST", "/virtual-keys", `{"name":"intruder","workspace_id":"` + keysOtherWS + `","provider":"openai","key":"sk-intruder-000000000"}`, 403, "workspace_forbidden"},
		{"creates a config there", "POST", "/configs", `{"name":"intruder","workspace_id":"` + keysOtherWS + `","config":{"virtual_key":"openai"}}`, 403, "workspace_forbidden"},
		{"deletes a virtual key", "DELETE", "/virtual-keys/" + vk.Slug + wsq, "", 403, "workspace_forbidden"},
		{"deletes a config by id", "DELETE", "/configs/" + cfg.ID, "", 404, ""},
		{"revokes a key by id", "DELETE", "/api-keys/" + o1.ID, "", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := as(t, o2Admin, tc.method, tc.path, tc.body, tc.status, nil)
			if tc.code != "" && errCode(t, raw) != tc.code {
				t.Fatalf("code %s: %s", errCode(t, raw), raw)
			}
			if strings.Contains(string(raw), vk.ID) || strings.Contains(string(raw), o1.ID) && tc.status != 404 {
				t.Fatalf("the answer names another organisation's record: %s", raw)
			}
		})
	}
	// Its own lists hold nothing of keysOrg's.
	for _, path := range []string{"/api-keys", "/virtual-keys", "/configs", "/audit-logs"} {
		raw := as(t, o2Admin, "GET", path, "", 200, nil)
		if strings.Contains(string(raw), keysOtherWS) || strings.Contains(string(raw), keysWorkspace) {
			t.Fatalf("%s lists another organisation's records: %s", path, raw)
		}
	}
	// Nothing was spent through or removed: keysOrg's records stand.
	if up.count() != 0 {
		t.Fatalf("the provider saw %d calls", up.count())
	}
	as(t, keysAdminKey, "GET", "/virtual-keys/"+vk.Slug+wsq, "", 200, nil)
	as(t, keysAdminKey, "GET", "/configs/"+cfg.ID, "", 200, nil)
	// The virtual key of keysOrg's workspace is not o2's to route with.
	call(t, "POST", "/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 404, nil,
		"x-gateway-api-key", o2Admin, "x-gateway-virtual-key", vk.Slug)
}

// TestTenancyRotateBeyondReach: a key never rotates, changes or revokes
// a key wider than itself: a workspace key holding api_keys.update does
// not reach an organisation key (404, so it never receives its secret)
// and cannot rotate a sibling holding "*" (403).
func TestTenancyRotateBeyondReach(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	updater := wsKey(t, keysAdminKey, keysWorkspace, "updater", `"scopes":["api_keys.update","api_keys.read"]`)
	star := wsKey(t, keysAdminKey, keysWorkspace, "star", `"scopes":["*"]`)
	var org createdKey
	as(t, keysAdminKey, "POST", "/api-keys/organisation/service", `{"name":"org","workspace_id":"`+keysWorkspace+`","scopes":["api_keys.read"]}`, 200, &org)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"rotates an organisation key of its workspace", "POST", "/api-keys/" + org.ID + "/rotate", "{}", 404, ""},
		{"reads an organisation key of its workspace", "GET", "/api-keys/" + org.ID, "", 404, ""},
		{"changes an organisation key", "PUT", "/api-keys/" + org.ID, `{"description":"x"}`, 404, ""},
		{"rotates a sibling holding *", "POST", "/api-keys/" + star.ID + "/rotate", "{}", 403, "key_beyond_reach"},
		{"changes a sibling holding *", "PUT", "/api-keys/" + star.ID, `{"scopes":["api_keys.read"]}`, 403, "key_beyond_reach"},
		{"grants itself * through a sibling's scopes", "PUT", "/api-keys/" + star.ID, `{"description":"mine now"}`, 403, "key_beyond_reach"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := as(t, updater.Key, tc.method, tc.path, tc.body, tc.status, nil)
			if strings.Contains(string(raw), `"key":"gw-`) {
				t.Fatalf("the answer holds a key: %s", raw)
			}
			if tc.code != "" && errCode(t, raw) != tc.code {
				t.Fatalf("code %s: %s", errCode(t, raw), raw)
			}
		})
	}
	// The organisation key is not listed to the workspace key either.
	raw := as(t, updater.Key, "GET", "/api-keys", "", 200, nil)
	if strings.Contains(string(raw), org.ID) || strings.Contains(string(raw), `"source":"config"`) && strings.Contains(string(raw), `"name":"admin"`) {
		t.Fatalf("a workspace key lists organisation keys: %s", raw)
	}
	// The star key still works: nothing rotated it.
	as(t, star.Key, "GET", "/api-keys/"+star.ID, "", 200, nil)
	// A key may rotate a sibling within its reach, and itself.
	narrow := wsKey(t, keysAdminKey, keysWorkspace, "narrow", `"scopes":["api_keys.read"]`)
	as(t, updater.Key, "POST", "/api-keys/"+narrow.ID+"/rotate", "{}", 200, nil)
	as(t, updater.Key, "POST", "/api-keys/"+updater.ID+"/rotate", `{"key_transition_period_ms":60000}`, 200, nil)
}

// TestTenancyMintWithinModels: a key restricted by allowed_models mints
// only keys restricted to those models or fewer.
func TestTenancyMintWithinModels(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	minter := wsKey(t, keysAdminKey, keysWorkspace, "minter", `"scopes":["api_keys.create","api_keys.update","completions.write"],"allowed_models":["gpt-4o*"]`)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"no allow-list: every model", `"scopes":["completions.write"]`, 403},
		{"an empty allow-list", `"scopes":["completions.write"],"allowed_models":[]`, 403},
		{"another model", `"scopes":["completions.write"],"allowed_models":["o3"]`, 403},
		{"a wider pattern", `"scopes":["completions.write"],"allowed_models":["gpt-*"]`, 403},
		{"one of its models", `"scopes":["completions.write"],"allowed_models":["gpt-4o-mini"]`, 200},
		{"a narrower pattern", `"scopes":["completions.write"],"allowed_models":["gpt-4o-mini*"]`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := as(t, minter.Key, "POST", "/api-keys/workspace/service", `{"name":"child-`+strings.ReplaceAll(tc.name, " ", "-")+`",`+tc.body+`}`, tc.status, nil)
			if tc.status == 403 && errCode(t, raw) != "allowed_models_beyond_reach" {
				t.Fatalf("code: %s", raw)
			}
		})
	}
	// Nor does a PUT widen a child it made.
	child := wsKey(t, minter.Key, keysWorkspace, "child", `"scopes":["completions.write"],"allowed_models":["gpt-4o"]`)
	as(t, minter.Key, "PUT", "/api-keys/"+child.ID, `{"allowed_models":null}`, 403, nil)
	as(t, minter.Key, "PUT", "/api-keys/"+child.ID, `{"allowed_models":["o3"]}`, 403, nil)
}

// TestTenancySelfLimits: a key cannot lift its own usage limit, model
// allow-list, rate limits, expiry or scopes with a PUT on itself; it may
// change its description.
func TestTenancySelfLimits(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	expiry := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	self := wsKey(t, keysAdminKey, keysWorkspace, "self", `"scopes":["api_keys.update","api_keys.read"],"allowed_models":["gpt-4o*"],"usage_limits":{"credit_limit":1,"periodic_reset":"monthly"},"expires_at":"`+expiry+`"`)
	for _, tc := range []struct{ name, body string }{
		{"usage limits cleared", `{"usage_limits":null}`},
		{"usage limit raised", `{"usage_limits":{"credit_limit":1000,"periodic_reset":"monthly"}}`},
		{"allowed models cleared", `{"allowed_models":null}`},
		{"allowed models widened", `{"allowed_models":["*"]}`},
		{"rate limits", `{"rate_limits":[{"type":"requests","unit":"rpm","value":100000}]}`},
		{"expiry cleared", `{"expires_at":null}`},
		{"expiry moved", `{"expires_at":"` + time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339) + `"}`},
		{"scopes", `{"scopes":["api_keys.read"]}`},
		{"name (its usage limit's key)", `{"name":"renamed"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := as(t, self.Key, "PUT", "/api-keys/"+self.ID, tc.body, 403, nil)
			if errCode(t, raw) != "self_change_forbidden" {
				t.Fatalf("code: %s", raw)
			}
		})
	}
	var rec struct {
		AllowedModels []string       `json:"allowed_models"`
		UsageLimits   map[string]any `json:"usage_limits"`
	}
	as(t, self.Key, "PUT", "/api-keys/"+self.ID, `{"description":"mine"}`, 200, nil)
	as(t, self.Key, "GET", "/api-keys/"+self.ID, "", 200, &rec)
	if len(rec.AllowedModels) != 1 || rec.UsageLimits["credit_limit"] != float64(1) {
		t.Fatalf("the key's limits changed: %+v", rec)
	}
}

// TestTenancyRenameToCaddyfileName: a PUT cannot give a key the name of
// a Caddyfile key, which create refuses (409 declared_in_caddyfile).
func TestTenancyRenameToCaddyfileName(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	k := wsKey(t, keysAdminKey, keysWorkspace, "plain", `"scopes":["completions.write"]`)
	raw := as(t, keysAdminKey, "PUT", "/api-keys/"+k.ID, `{"name":"admin"}`, 409, nil)
	if errCode(t, raw) != "declared_in_caddyfile" {
		t.Fatalf("code: %s", raw)
	}
}

// TestTenancyConfigsRedacted: configs are answered without their
// credentials (provider api_key, webhook header values): a Caddyfile
// config to a workspace key holding configs.read, and an API config with
// its versions, each secret replaced by "****".
func TestTenancyConfigsRedacted(t *testing.T) {
	up := newFakeOpenAI(t)
	s := tenancySite(t, up.URL)
	s.load(t)
	reader := wsKey(t, keysAdminKey, keysWorkspace, "reader", `"scopes":["configs.read"]`)
	const apiSecret = "sk-api-config-SECRET-5e6f"
	const apiHook = "api-hook-SECRET-7a8b"
	var cfg struct{ Slug string }
	as(t, keysAdminKey, "POST", "/configs", `{"name":"api-leaky","workspace_id":"`+keysWorkspace+`","config":{"provider":"openai","api_key":"`+apiSecret+`","before_request_hooks":[{"id":"wh","checks":[{"id":"default.webhook","parameters":{"webhookURL":"http://127.0.0.1:9/hook","headers":{"x-token":"`+apiHook+`"}}}]}]}}`, 200, &cfg)
	as(t, keysAdminKey, "PUT", "/configs/"+cfg.Slug, `{"config":{"provider":"openai","api_key":"`+apiSecret+`-v2"}}`, 200, nil)
	for _, tc := range []struct{ key, path string }{
		{reader.Key, "/configs/leaky"},
		{keysAdminKey, "/configs/leaky"},
		{reader.Key, "/configs/" + cfg.Slug},
		{reader.Key, "/configs/" + cfg.Slug + "/versions"},
		{reader.Key, "/configs"},
	} {
		raw := as(t, tc.key, "GET", tc.path, "", 200, nil)
		for _, secret := range []string{caddyfileCfgKey, caddyfileHookKey, apiSecret, apiHook} {
			if strings.Contains(string(raw), secret) {
				t.Fatalf("GET %s answers a secret: %s", tc.path, raw)
			}
		}
		if tc.path != "/configs" && !strings.Contains(string(raw), `"api_key":"****"`) {
			t.Fatalf("GET %s: no redacted api_key: %s", tc.path, raw)
		}
	}
	raw := as(t, reader.Key, "GET", "/configs/leaky", "", 200, nil)
	if !strings.Contains(string(raw), `"x-hook-token":"****"`) || !strings.Contains(string(raw), `"webhookURL":"http://127.0.0.1:9/hook"`) {
		t.Fatalf("the webhook header is not redacted in place: %s", raw)
	}
	// The Caddyfile config stays read-only.
	as(t, keysAdminKey, "PUT", "/configs/leaky", `{"name":"x"}`, 409, nil)
	// A config read back and sent as is is refused, never stored with the
	// mask as its key.
	raw = as(t, keysAdminKey, "PUT", "/configs/"+cfg.Slug, `{"config":{"provider":"openai","api_key":"****"}}`, 400, nil)
	if !strings.Contains(string(raw), "api_key") {
		t.Fatalf("the refusal does not name api_key: %s", raw)
	}
}

// TestTenancyConfigNamesUnescaped: a config's member names are compared
// after unescaping, and a member given twice is refused, so
// "custom\u005fhost" is refused as custom_host is.
func TestTenancyConfigNamesUnescaped(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	s.load(t)
	for _, tc := range []struct{ name, config, want string }{
		{"escaped custom_host", `{"provider":"openai","api_key":"sk-x","custom\u005fhost":"http://127.0.0.1:1"}`, "custom_host"},
		{"escaped custom_host in a target", `{"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"openai"},{"provider":"openai","api_key":"sk-x","custom\u005Fhost":"http://127.0.0.1:1"}]}`, "custom_host"},
		{"duplicate member", `{"virtual_key":"openai","virtual_key":"nope"}`, "virtual_key"},
		{"duplicate after unescaping", `{"virtual_key":"openai","virtual\u005fkey":"nope"}`, "virtual_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, body := range []string{
				`{"name":"c","config":` + tc.config + `}`,
				// The SDK may send the config as a JSON string.
				`{"name":"c","config":` + cfgString(tc.config) + `}`,
			} {
				raw := as(t, gatewayKey, "POST", "/configs", body, 400, nil)
				if !strings.Contains(string(raw), tc.want) {
					t.Fatalf("the refusal does not name %s: %s", tc.want, raw)
				}
			}
		})
	}
	// The whole body is read strictly too: a member given twice is a 400.
	raw := as(t, gatewayKey, "POST", "/configs", `{"name":"c","config":{"virtual_key":"openai"},"name":"d"}`, 400, nil)
	if !strings.Contains(string(raw), "name") {
		t.Fatalf("duplicate body member: %s", raw)
	}
	if up.count() != 0 {
		t.Fatal("a refused config reached the provider")
	}
}

// cfgString quotes s as a JSON string, escaping only what JSON needs
// (so a \u escape inside s stays an escape of the inner JSON).
func cfgString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestTenancyPrintableNames: names of keys, virtual keys and configs are
// printable: NUL, newline, ESC and bidi overrides are a 400 naming the
// member.
func TestTenancyPrintableNames(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	for _, bad := range []struct{ name, value string }{
		{"NUL", `a\u0000b`}, {"newline", `a\nb`}, {"ESC", `a\u001b[31mb`}, {"bidi override", "a\u202eb"}, {"bidi isolate", `a\u2066b`}, {"zero-width", "a\u200bb"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			for _, tc := range []struct{ path, body, param string }{
				{"/api-keys/workspace/service", `{"name":"` + bad.value + `","scopes":["completions.write"]}`, "name"},
				{"/virtual-keys", `{"name":"` + bad.value + `","slug":"s","provider":"openai","key":"sk-0000000000000000"}`, "name"},
				{"/configs", `{"name":"` + bad.value + `","slug":"s","config":{"retry":{"attempts":1}}}`, "name"},
				{"/api-keys/workspace/user", `{"name":"ok","user_id":"` + bad.value + `","scopes":["completions.write"]}`, "user_id"},
			} {
				status, m := api(t, gatewayKey, "POST", tc.path, tc.body)
				e, _ := m["error"].(map[string]any)
				if status != 400 || e["param"] != tc.param {
					t.Fatalf("POST %s: %d %v, want 400 naming %s", tc.path, status, m, tc.param)
				}
			}
		})
	}
	// A PUT is held to the same rule.
	k := wsKey(t, keysAdminKey, keysWorkspace, "printable", `"scopes":["completions.write"]`)
	as(t, keysAdminKey, "PUT", "/api-keys/"+k.ID, `{"name":"x\u202ey"}`, 400, nil)
	// Letters of any script remain names.
	wsKey(t, keysAdminKey, keysWorkspace, "équipe-東京", `"scopes":["completions.write"]`)
}
