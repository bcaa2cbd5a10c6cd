package integration

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestAffinityPromptCacheKey: an OpenAI target under a loadbalance with
// affinity is sent prompt_cache_key "gw-<session hash>" when the client
// sent none: the same on every turn of a session, another for another
// session; a key the client sent is passed as it is, and without
// affinity nothing is added.
func TestAffinityPromptCacheKey(t *testing.T) {
	up := newFakeOpenAI(t)
	loadFresh(t, site{})
	group := `{"strategy":{"mode":"loadbalance","affinity":{"ttl":60}},"targets":[` + target(up, "") + `,` + target(up, `"weight":2`) + `]}`
	plain := strings.Replace(group, `,"affinity":{"ttl":60}`, "", 1)
	sent := func(config, body string, headers ...string) gjson.Result {
		t.Helper()
		resp, raw := do(t, "POST", "/chat/completions", []byte(body), append([]string{"x-gateway-config", compactJSON(t, config)}, headers...)...)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		return gjson.GetBytes(up.last().Body, "prompt_cache_key")
	}
	a1 := sent(group, chatBody, "x-gateway-session-id", "session-a")
	a2 := sent(group, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`,
		"x-gateway-session-id", "session-a")
	b := sent(group, chatBody, "x-gateway-session-id", "session-b")
	if !strings.HasPrefix(a1.Str, "gw-") || a1.Str != a2.Str || b.Str == a1.Str || !strings.HasPrefix(b.Str, "gw-") {
		t.Fatalf("keys: session a %q then %q, session b %q", a1.Str, a2.Str, b.Str)
	}
	if strings.Contains(a1.Str, "session-a") {
		t.Fatalf("the key carries the client's session id: %q", a1.Str)
	}
	// The conversation's hash names a session too: its turns share a key.
	c1 := sent(group, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"first"}]}`)
	c2 := sent(group, `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"first"},{"role":"assistant","content":"ok"},{"role":"user","content":"second"}]}`)
	if !strings.HasPrefix(c1.Str, "gw-") || c1.Str != c2.Str {
		t.Fatalf("conversation keys %q and %q", c1.Str, c2.Str)
	}
	if own := sent(group, `{"model":"gpt-4o-mini","prompt_cache_key":"mine","messages":[{"role":"user","content":"hi"}]}`, "x-gateway-session-id", "session-a"); own.Str != "mine" {
		t.Fatalf("the client's key became %q", own.Str)
	}
	if none := sent(plain, chatBody, "x-gateway-session-id", "session-a"); none.Exists() {
		t.Fatalf("without affinity the gateway added %q", none.Str)
	}
}
