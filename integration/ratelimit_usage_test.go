package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rlNoReadKey is a key of the rate-limit test workspace that may call
// models but not read rate-limit policies.
const rlNoReadKey = "rl-no-read-key-0123456789"

// TestRateLimitUsageAPI: after 3 requests under a 10 rpm per-key policy,
// GET /v1/policies/rate-limits/{id}/usage tells the caller it used 3 of
// 10, without spending any (read twice, the same), another key of the
// workspace reads its own group (0) or the caller's by name, the
// collection route lists the caller's own usage, another workspace's key
// gets 404 and a key without rate_limits.read 403; group parameters the
// policy does not group by are 400s.
// It runs with the in-process counters and with Redis's (DB 9, the
// rate-limit tests' own, cleaned of this process's policies only).
func TestRateLimitUsageAPI(t *testing.T) {
	for _, tc := range []struct {
		name  string
		redis bool
	}{{"memory", false}, {"redis", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// The extra key goes into the llm block through the site's
			// Redis field, which is only text placed there.
			llm := `api_key noread ` + rlNoReadKey + ` {
			workspace_id ` + rlWS + `
			organisation_id ` + rlOrg + `
			scopes completions.write
		}`
			if tc.redis {
				requireRedis(t)
				llm += "\n\t\t" + redisBlock(false)
			}
			loadRL(t, rlSite{Redis: llm})
			testRateLimitUsage(t)
		})
	}
}

func testRateLimitUsage(t *testing.T) {
	up := newFakeOpenAI(t)
	id := createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":10,"name":"usage","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
	start := time.Now()
	for i := range 3 {
		if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	path := "/policies/rate-limits/" + id + "/usage"
	for range 2 {
		status, u := api(t, gatewayKey, http.MethodGet, path, "")
		if status != 200 || u["object"] != "rate-limit-usage" || u["policy_id"] != id || u["used"] != 3.0 || u["remaining"] != 7.0 || u["value"] != 10.0 {
			t.Fatalf("usage: %d %v", status, u)
		}
		if g, _ := u["group"].(map[string]any); len(g) != 1 || g["api_key"] != "test" {
			t.Fatalf("group %v, want the caller's key name", u["group"])
		}
		ends, err := time.Parse(time.RFC3339Nano, u["window_ends"].(string))
		if err != nil || ends.Before(start.Add(59*time.Second)) || ends.After(time.Now().Add(62*time.Second)) {
			t.Fatalf("window_ends %v (%v), want about a minute after the requests", u["window_ends"], err)
		}
		if ra, _ := u["reset_after"].(float64); ra <= 0 || ra > 62 { // a window plus at most one bucket (1 s)
			t.Fatalf("reset_after %v", u["reset_after"])
		}
	}
	// The second key of the workspace sees its own group, or the test
	// key's when it names it (key names are no secret in a workspace).
	if status, u := api(t, rlSecondKey, http.MethodGet, path, ""); status != 200 || u["used"] != 0.0 || u["remaining"] != 10.0 || u["window_ends"] != nil {
		t.Fatalf("second key's own usage: %d %v", status, u)
	}
	if status, u := api(t, rlSecondKey, http.MethodGet, path+"?api_key=test", ""); status != 200 || u["used"] != 3.0 {
		t.Fatalf("second key reading the test key's group: %d %v", status, u)
	}
	// The caller's own usage on every policy its identity groups.
	status, l := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/usage", "")
	data, _ := l["data"].([]any)
	if status != 200 || len(data) != 1 || data[0].(map[string]any)["policy_id"] != id || data[0].(map[string]any)["used"] != 3.0 {
		t.Fatalf("own usage list: %d %v", status, l)
	}

	for _, tc := range []struct {
		name   string
		key    string
		path   string
		status int
		code   string
		param  string
	}{
		{"another workspace's key", rlOtherKey, path, 404, "policy_not_found", ""},
		{"another workspace's key naming the group", rlOtherKey, path + "?api_key=test", 404, "policy_not_found", ""},
		{"another workspace's key lists none", rlOtherKey, "/policies/rate-limits/usage", 200, "", ""},
		{"a key without rate_limits.read", rlNoReadKey, path, 403, "missing_scope", ""},
		{"a key without rate_limits.read, own list", rlNoReadKey, "/policies/rate-limits/usage", 403, "missing_scope", ""},
		{"not a group_by key", gatewayKey, path + "?model=gpt-4o-mini", 400, "", "model"},
		{"another workspace named", gatewayKey, path + "?workspace_id=" + rlOtherWS, 400, "", "workspace_id"},
		{"a value over 256 bytes", gatewayKey, path + "?api_key=" + strings.Repeat("k", 257), 400, "", "api_key"},
		{"a key given twice", gatewayKey, path + "?api_key=a&api_key=b", 400, "", "api_key"},
		{"not a UUID", gatewayKey, "/policies/rate-limits/nope/usage", 400, "", "rateLimitsPolicyId"},
		{"no such policy", gatewayKey, "/policies/rate-limits/" + rlOtherWS + "/usage", 404, "policy_not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := api(t, tc.key, http.MethodGet, tc.path, "")
			if status != tc.status || errField(m, "code") != tc.code || errParam(m) != tc.param {
				t.Fatalf("%d %v, want %d %q %q", status, m, tc.status, tc.code, tc.param)
			}
			if status == 200 {
				if d, _ := m["data"].([]any); len(d) != 0 {
					t.Fatalf("another workspace sees %v", m)
				}
			}
		})
	}
	// None of the reads spent anything.
	if _, u := api(t, gatewayKey, http.MethodGet, path, ""); u["used"] != 3.0 {
		t.Fatalf("reads were counted: %v", u)
	}
	// A group_by the identity does not fill: the caller names the group,
	// and the collection route leaves the policy out.
	byTeam := createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":5,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"metadata.team"}]}`)
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "", "x-gateway-metadata", `{"team":"red"}`); resp.StatusCode != 200 {
		t.Fatalf("request with metadata: %d %s", resp.StatusCode, raw)
	}
	q := url.Values{"metadata.team": {"red"}}.Encode()
	if status, u := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+byTeam+"/usage?"+q, ""); status != 200 || u["used"] != 1.0 || u["remaining"] != 4.0 {
		t.Fatalf("team red: %d %v", status, u)
	}
	if _, l := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/usage", ""); len(l["data"].([]any)) != 1 {
		t.Fatalf("a policy grouped by metadata is listed as the caller's: %v", l)
	}
}
