package integration

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestEgressPromptCustomHost: an API prompt is client input, so a
// custom_host saved in its provider settings is checked by the egress
// policy of the route that runs it, whether the prompt is named by a
// config target's prompt_id or rendered through /prompts/{id}/completions.
// On a route with the default (public-only) policy a loopback address is
// refused and never dialled.
func TestEgressPromptCustomHost(t *testing.T) {
	open, accepted := acceptCounter(t)
	s := newPromptSite(t, "")
	s.Gateway = "max_request_body 1MB" // no custom_host_allow: public only
	s.load(t)
	settings, _ := json.Marshal(map[string]string{"custom_host": "http://127.0.0.1:" + open + "/v1"})
	var created struct{ Slug string }
	call(t, "POST", "/prompts", fmt.Sprintf(`{"name":"Internal","string":"[{\"role\":\"user\",\"content\":\"{{q}}\"}]","provider":"openai","provider_settings":%s,"model":"m"}`, settings), 200, &created)
	if created.Slug == "" {
		t.Fatal("created prompt has no slug")
	}
	cases := []struct {
		name, path, body string
		headers          []string
	}{
		{"config target prompt_id", "/chat/completions", `{"messages":[],"variables":{"q":"hi"}}`,
			[]string{"x-gateway-config", fmt.Sprintf(`{"strategy":{"mode":"fallback"},"targets":[{"prompt_id":%q}]}`, created.Slug)}},
		{"config prompt_id alone", "/chat/completions", `{"messages":[],"variables":{"q":"hi"}}`,
			[]string{"x-gateway-config", fmt.Sprintf(`{"prompt_id":%q}`, created.Slug)}},
		{"prompt completions", "/prompts/" + created.Slug + "/completions", `{"variables":{"q":"hi"}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := do(t, "POST", tc.path, []byte(tc.body), append(tc.headers, "Authorization", "Bearer sk-test-provider")...)
			r := refusalOf(t, resp.StatusCode, raw)
			if r.status != 400 || r.code != "custom_host_not_allowed" {
				t.Fatalf("got %+v, want 400 custom_host_not_allowed", r)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("a prompt's loopback custom host was dialled %d times", n)
	}
}
