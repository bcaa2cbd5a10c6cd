package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth/jwttest"
)

// TestIdentityJWTChat: the official OpenAI SDK calls chat with an IdP
// access token as its gateway key; the provider gets the provider key,
// never the token; the same token as Authorization: Bearer (no
// x-gateway-api-key) authenticates too and is never forwarded.
func TestIdentityJWTChat(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "", "", "")
	token := userToken(is, "alice")

	c := tokenClient(token, up.URL)
	got, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"))
	if err != nil {
		t.Fatalf("chat with an IdP token: %v", err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content == "" {
		t.Fatalf("answer: %+v", got)
	}
	seen := up.last()
	if a := seen.Header.Get("Authorization"); a != "Bearer sk-test-provider" {
		t.Errorf("the provider got Authorization %q, want the provider key", a)
	}
	for name, vs := range seen.Header {
		if strings.Contains(strings.Join(vs, " "), token) {
			t.Errorf("the provider got the IdP token in %s", name)
		}
	}

	// As Authorization: Bearer, the token is the gateway key and so not
	// a provider key: with no provider key of its own, the request is
	// refused for that (the caller was authenticated), before any call.
	calls := up.count()
	resp, raw := rawDo(t, gatewayURL(), http.MethodPost, "/chat/completions",
		[]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`),
		"Authorization", "Bearer "+token, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	if resp.StatusCode != http.StatusUnauthorized || errCode(t, raw) != "missing_provider_key" {
		t.Fatalf("the token as Authorization: Bearer: %d %s; want 401 missing_provider_key (authenticated, not forwarded)", resp.StatusCode, raw)
	}
	if up.count() != calls {
		t.Fatalf("the provider was called with the token as its key")
	}
}

// TestIdentityJWTPerUserRateLimit: a Caddyfile policy grouped by api_key
// limits each token user on its own: alice's third request in the minute
// is a 429 while bob, and the workspace's gateway key, still pass.
func TestIdentityJWTPerUserRateLimit(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "", `
			policy per-user {
				type requests
				unit rpm
				value 2
				group_by api_key
			}`, "")
	alice, bob := userToken(is, "alice"), userToken(is, "bob")
	if got := statusesOf(t, 3, alice, up.URL); got != "200 200 429" {
		t.Fatalf("alice: %s, want 200 200 429 (her own limit of 2)", got)
	}
	if got := statusesOf(t, 2, bob, up.URL); got != "200 200" {
		t.Fatalf("bob after alice was limited: %s, want 200 200 (a limit of his own)", got)
	}
	// A second token of alice's (a refreshed one) is the same user.
	again := is.Std("alice", is.Audience, 4*time.Minute)
	again["groups"] = []string{idpGroup}
	if got := statusesOf(t, 1, is.Mint(again), up.URL); got != "429" {
		t.Fatalf("alice with a new token: %s, want 429 (the user, not the token, is limited)", got)
	}
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 {
		t.Fatalf("the gateway key after the users were limited: %d %s", resp.StatusCode, raw)
	}
}

// TestIdentityJWTPerUserBudget: a usage limit grouped by api_key gives
// each token user a budget of its own: alice spends hers and gets the
// 412 budget_exceeded, bob still passes; the ledger holds alice's spend
// under user:alice (GET /v1/usage/me with her token), to the
// nano-dollar of the x-gateway-cost headers she got.
func TestIdentityJWTPerUserBudget(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "", "", sqliteLedger(t))
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", tinyBudget); status != 200 {
		t.Fatalf("create the usage limit: %d %v", status, m)
	}
	alice, bob := userToken(is, "alice"), userToken(is, "bob")
	var spent int64
	ok, last, raw := spendUntilRefused(t, tinyBudgetNano, func() (*http.Response, []byte) {
		resp, raw := tokenChat(t, alice, up.URL)
		if resp.StatusCode == 200 {
			spent += costNano(t, resp.Header.Get("X-Gateway-Cost"))
		}
		return resp, raw
	})
	if want := passesOn(tinyBudgetNano, rlChatNano); ok != want || last.StatusCode != http.StatusPreconditionFailed || errCode(t, raw) != budgets.CodeExceeded {
		t.Fatalf("alice: %d requests passed, then %d %s; want %d then 412 %s", ok, last.StatusCode, raw, want, budgets.CodeExceeded)
	}
	if resp, raw := tokenChat(t, bob, up.URL); resp.StatusCode != 200 {
		t.Fatalf("bob after alice's budget was spent: %d %s", resp.StatusCode, raw)
	}

	syncLedger(t)
	var me struct {
		APIKey string `json:"api_key"`
		Month  struct {
			Requests int64  `json:"requests"`
			CostUSD  string `json:"cost_usd"`
		} `json:"month"`
	}
	resp, body := rawDo(t, gatewayURL(), http.MethodGet, "/usage/me", nil, "x-gateway-api-key", alice)
	if resp.StatusCode != 200 || json.Unmarshal(body, &me) != nil {
		t.Fatalf("usage/me with alice's token: %d %s", resp.StatusCode, body)
	}
	// The ledger holds the refused request too (at no cost).
	if me.APIKey != jwtauth.UserPrefix+"alice" || me.Month.Requests != int64(ok)+1 ||
		nanoOf(t, me.Month.CostUSD).Cmp(new(big.Rat).SetInt64(spent)) != 0 {
		t.Fatalf("usage/me: %s; want api_key user:alice, %d requests costing %d nano-dollars", body, ok+1, spent)
	}
}

// TestIdentityJWTKeyRotation: the IdP rotates its signing key (a new
// kid, the old key withdrawn); a token signed with the new key is
// accepted with no reload, by one refetch of the JWKS.
func TestIdentityJWTKeyRotation(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "", "", "")
	if resp, raw := tokenChat(t, userToken(is, "alice"), up.URL); resp.StatusCode != 200 {
		t.Fatalf("before the rotation: %d %s", resp.StatusCode, raw)
	}
	fetches := is.JWKSFetches()
	kid := is.Rotate()
	token := userToken(is, "alice")
	if !strings.Contains(token, ".") || is.DefaultKID() != kid {
		t.Fatalf("the rotation did not take")
	}
	if resp, raw := tokenChat(t, token, up.URL); resp.StatusCode != 200 {
		t.Fatalf("a token of the new key %s: %d %s", kid, resp.StatusCode, raw)
	}
	if n := is.JWKSFetches() - fetches; n != 1 {
		t.Errorf("the JWKS was fetched %d times for the new kid, want once", n)
	}
}

// TestIdentityJWTGroupRemoved: with userinfo, a user the IdP removes
// from the admitted group is refused (401 token_not_allowed) once the
// cache_ttl has passed, with the same, still valid token.
func TestIdentityJWTGroupRemoved(t *testing.T) {
	const ttl = time.Second
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "userinfo\n\t\t\tcache_ttl 1s", "", "")
	is.SetUser("alice", map[string]any{"groups": []string{idpGroup}})
	token := userToken(is, "alice")
	if resp, raw := tokenChat(t, token, up.URL); resp.StatusCode != 200 {
		t.Fatalf("alice in the group: %d %s", resp.StatusCode, raw)
	}
	is.SetUser("alice", map[string]any{"groups": []string{"alumni"}})
	// Past the TTL the cached caller is gone, whatever the machine's
	// speed: no assertion depends on how long anything took.
	time.Sleep(ttl + 100*time.Millisecond)
	calls := up.count()
	resp, raw := tokenChat(t, token, up.URL)
	if resp.StatusCode != http.StatusUnauthorized || errCode(t, raw) != jwtauth.CodeForbidden {
		t.Fatalf("alice removed from the group, after cache_ttl: %d %s; want 401 %s", resp.StatusCode, raw, jwtauth.CodeForbidden)
	}
	if up.count() != calls {
		t.Errorf("the provider was called for a refused user")
	}
}

// TestIdentityJWTRefused: tokens that must not pass are 401s in the
// OpenAI error envelope (authentication_error, the documented code; on
// Messages, Anthropic's error shape), and the provider is never called:
// a forged signature (the published kid, another key), expired, another
// audience, another issuer, alg none, HS256 keyed with the IdP's public
// key, and a user in no admitted group.
func TestIdentityJWTRefused(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "", "", "")
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(edit func(jwttest.Claims)) jwttest.Claims {
		c := is.Std("mallory", is.Audience, 5*time.Minute)
		c["groups"] = []string{idpGroup}
		if edit != nil {
			edit(c)
		}
		return c
	}
	for _, tc := range []struct {
		name, token, code string
	}{
		{"forged signature", jwttest.Sign(jose.RS256, forger, is.DefaultKID(), claims(nil)), jwtauth.CodeInvalidToken},
		{"expired", is.Mint(claims(func(c jwttest.Claims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), jwtauth.CodeExpired},
		{"wrong audience", is.Mint(claims(func(c jwttest.Claims) { c["aud"] = "another-api" })), jwtauth.CodeAudience},
		{"wrong issuer", is.Mint(claims(func(c jwttest.Claims) { c["iss"] = "https://idp.example.com" })), jwtauth.CodeIssuer},
		{"alg none", jwttest.Unsigned(claims(nil)), jwtauth.CodeInvalidToken},
		{"HS256 with the public key", jwttest.Sign(jose.HS256, is.PublicRSA(), is.DefaultKID(), claims(nil)), jwtauth.CodeInvalidToken},
		{"in no admitted group", is.Mint(claims(func(c jwttest.Claims) { c["groups"] = []string{"alumni"} })), jwtauth.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := tokenChat(t, tc.token, up.URL)
			var env struct {
				Error struct {
					Type, Code, Message string
				} `json:"error"`
			}
			if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(raw, &env) != nil ||
				env.Error.Type != "authentication_error" || env.Error.Code != tc.code || env.Error.Message == "" {
				t.Fatalf("%d %s; want 401 authentication_error %s", resp.StatusCode, raw, tc.code)
			}
			if strings.Contains(string(raw), tc.token) {
				t.Errorf("the answer repeats the token")
			}
		})
	}
	// On Anthropic's road (x-api-key, /v1/messages) the refusal is in
	// Anthropic's error shape.
	resp, raw := rawDo(t, gatewayURL(), http.MethodPost, "/messages",
		[]byte(`{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`),
		"x-api-key", is.Mint(claims(func(c jwttest.Claims) { c["aud"] = "another-api" })), "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(raw, &env) != nil || env.Type != "error" || env.Error.Type != "authentication_error" {
		t.Errorf("Messages with a wrong-audience token: %d %s; want 401 in Anthropic's error shape", resp.StatusCode, raw)
	}
	if n := up.count(); n != 0 {
		t.Errorf("the provider was called %d times for refused tokens", n)
	}
}

// TestIdentityKeyNamesReserved: an API key may not be named user:<x>,
// created or renamed (it would share user x's limits and budgets): a
// 400 name_reserved in the API's envelope, nothing stored.
func TestIdentityKeyNamesReserved(t *testing.T) {
	is := newIdP(t)
	loadIdP(t, is, "", "", "")
	raw := as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"user:alice","scopes":["completions.write"]}`, 400, nil)
	if errCode(t, raw) != "name_reserved" {
		t.Fatalf("create user:alice: %s, want name_reserved", raw)
	}
	var created createdKey
	as(t, gatewayKey, "POST", "/api-keys/workspace/service", `{"name":"alice-service","scopes":["completions.write"]}`, 200, &created)
	raw = as(t, gatewayKey, "PUT", "/api-keys/"+created.ID, `{"name":"user:alice"}`, 400, nil)
	if errCode(t, raw) != "name_reserved" {
		t.Fatalf("rename to user:alice: %s, want name_reserved", raw)
	}
	var rec keyRecord
	as(t, gatewayKey, "GET", "/api-keys/"+created.ID, "", 200, &rec)
	if rec.Name != "alice-service" {
		t.Fatalf("the refused rename was stored: %q", rec.Name)
	}
}
