package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
)

// TestIdentityUsersRecorded: a token user is recorded on its first
// request and listed by GET /v1/users (the workspace's gateway key reads
// it); removed from the IdP's group, the refusal (token_not_allowed)
// disables the record.
func TestIdentityUsersRecorded(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "userinfo\n\t\t\tcache_ttl 1s", "", "")
	is.SetUser("alice", map[string]any{"groups": []string{idpGroup}})
	token := userToken(is, "alice")
	if status, m := api(t, gatewayKey, http.MethodGet, "/users", ""); status != 200 || m["total"].(float64) != 0 {
		t.Fatalf("users before any token: %d %v", status, m)
	}
	if resp, raw := tokenChat(t, token, up.URL); resp.StatusCode != 200 {
		t.Fatalf("alice: %d %s", resp.StatusCode, raw)
	}
	status, raw := bcall(t, http.MethodGet, gatewayURL(), "/users", nil, "", "x-gateway-api-key", gatewayKey)
	u := gjson.GetBytes(raw, `data.#(name=="user:alice")`)
	if status != 200 || u.Get("status").Str != "active" || u.Get("workspace_id").Str != rlWS || u.Get("scopes.0").Str != "completions.write" {
		t.Fatalf("users after alice's request: %d %s", status, raw)
	}
	is.SetUser("alice", map[string]any{"groups": []string{"alumni"}})
	time.Sleep(time.Second + 100*time.Millisecond) // past cache_ttl: no assertion on time
	if resp, raw := tokenChat(t, token, up.URL); resp.StatusCode != http.StatusUnauthorized || errCode(t, raw) != jwtauth.CodeForbidden {
		t.Fatalf("alice removed from the group: %d %s", resp.StatusCode, raw)
	}
	status, raw = bcall(t, http.MethodGet, gatewayURL(), "/users/"+u.Get("id").Str, nil, "", "x-gateway-api-key", gatewayKey)
	if got := gjson.ParseBytes(raw); status != 200 || got.Get("status").Str != "disabled" || got.Get("status_reason").Str != jwtauth.CodeForbidden {
		t.Fatalf("alice's record after the refusal: %d %s", status, raw)
	}
}

// TestIdentityUserBatchRuns: a managed batch submitted with a token runs
// as its user (App.Caller finds the user record), every line answered.
func TestIdentityUserBatchRuns(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	loadIdP(t, is, "", "", "")
	token := userToken(is, "alice")
	h := []string{"x-gateway-api-key", token, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL,
		"Authorization", "Bearer sk-test-provider"}
	base := gatewayURL()
	// Uploaded without a provider: the gateway keeps the file, so the
	// batch is the gateway's own (managed).
	file := uploadBatchFile(t, base, openaiBatchLines(3, 0), "x-gateway-api-key", token)
	id := mustCreateBatch(t, base, file, h...)
	b := waitBatchDone(t, base, id, h...)
	if b.Get("status").Str != "completed" || b.Get("request_counts.completed").Int() != 3 || b.Get("request_counts.failed").Int() != 0 {
		t.Fatalf("a token user's batch: %s", b.Raw)
	}
	if up.count() != 3 {
		t.Fatalf("the provider saw %d calls, want 3", up.count())
	}
}
