package integration

import (
	"testing"
)

// TestRateLimitKeyNamesPerWorkspace: API key names are unique within a
// workspace only. Under a Caddyfile policy grouped by api_key, keys of
// the same name in two workspaces each get the whole limit: one
// workspace's key exhausting it does not refuse the other's.
func TestRateLimitKeyNamesPerWorkspace(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{Limit: `
			policy per-key {
				type requests
				unit rpm
				value 2
				group_by api_key
			}`})
	newKey := func(admin string) string {
		var created createdKey
		as(t, admin, "POST", "/api-keys/workspace/service", `{"name":"shared","scopes":["completions.write"]}`, 200, &created)
		return created.Key
	}
	// The Caddyfile keys test and other hold every scope in their own
	// workspaces (rlWS and rlOtherWS).
	first, second := newKey(gatewayKey), newKey(rlOtherKey)
	statuses := func(key string) []int {
		var got []int
		for range 3 {
			resp, _ := rlChat(t, gatewayURL(), key, up.URL, "")
			got = append(got, resp.StatusCode)
		}
		return got
	}
	want := []int{200, 200, 429}
	for _, k := range []struct{ name, key string }{{"first workspace", first}, {"second workspace", second}} {
		if got := statuses(k.key); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("%s's key named shared: statuses %v, want %v (its own limit of 2)", k.name, got, want)
		}
	}
}
