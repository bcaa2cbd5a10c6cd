package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestPolicyChangesAudited changes a usage limit and a rate-limit policy
// through a real Caddy's HTTP API, one operation a row, and reads the
// audit log after each: the newest entry names the action, the record, the
// acting key and the changed fields, and holds none of the values sent;
// another workspace's key does not see the entries.
func TestPolicyChangesAudited(t *testing.T) {
	loadRL(t, rlSite{})
	const cond = `"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]`
	// Values that cannot occur in an id or a timestamp by chance.
	secrets := []string{"audited-name-zq", "renamed-zq", "71.4142", "63.1415", "97.5311", "4321.5", "8765.5", "rl-audited-zq"}
	ids := map[string]string{}
	for _, tc := range []struct {
		name, method, path, body string
		kind                     string // "budget" or "rl": whose id the row creates or uses
		action, resource         string
		fields                   []string
	}{
		{"create a usage limit", "POST", "/policies/usage-limits",
			`{"name":"audited-name-zq","type":"cost","credit_limit":71.4142,"alert_threshold":63.1415,"periodic_reset":"monthly",` + cond + `}`,
			"budget", "usage_limit.create", "usage_limit",
			[]string{"name", "type", "credit_limit", "alert_threshold", "periodic_reset", "conditions", "group_by", "status", "workspace_id"}},
		{"update it", "PUT", "/policies/usage-limits/{budget}",
			`{"name":"renamed-zq","type":"cost","credit_limit":97.5311,"alert_threshold":63.1415,"periodic_reset":"monthly",` + cond + `}`,
			"budget", "usage_limit.update", "usage_limit", []string{"name", "credit_limit"}},
		{"delete it", "DELETE", "/policies/usage-limits/{budget}", "", "budget", "usage_limit.delete", "usage_limit", []string{}},
		{"create a rate limit", "POST", "/policies/rate-limits",
			`{"name":"rl-audited-zq","type":"requests","unit":"rpm","value":4321.5,` + cond + `}`,
			"rl", "rate_limit.create", "rate_limit",
			[]string{"name", "type", "unit", "value", "conditions", "group_by", "status", "workspace_id"}},
		{"update it", "PUT", "/policies/rate-limits/{rl}", `{"value":8765.5}`, "rl", "rate_limit.update", "rate_limit", []string{"value"}},
		{"archive it", "DELETE", "/policies/rate-limits/{rl}", "", "rl", "rate_limit.delete", "rate_limit", []string{"status"}},
	} {
		path := strings.NewReplacer("{budget}", ids["budget"], "{rl}", ids["rl"]).Replace(tc.path)
		status, m := api(t, gatewayKey, tc.method, path, tc.body)
		if status != 200 {
			t.Fatalf("%s: %d %v", tc.name, status, m)
		}
		if id, ok := m["id"].(string); ok && ids[tc.kind] == "" {
			ids[tc.kind] = id
		}
		resp, raw := rawDo(t, gatewayURL(), http.MethodGet, "/audit-logs?limit=1", nil, "x-gateway-api-key", gatewayKey)
		var page struct {
			Data []struct {
				Action         string   `json:"action"`
				ResourceType   string   `json:"resource_type"`
				ResourceID     string   `json:"resource_id"`
				ActorKeyID     string   `json:"actor_key_id"`
				ActorName      string   `json:"actor_name"`
				WorkspaceID    string   `json:"workspace_id"`
				OrganisationID string   `json:"organisation_id"`
				ChangedFields  []string `json:"changed_fields"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &page); err != nil || resp.StatusCode != 200 || len(page.Data) != 1 {
			t.Fatalf("%s: audit log %d %s", tc.name, resp.StatusCode, raw)
		}
		e := page.Data[0]
		if e.Action != tc.action || e.ResourceType != tc.resource || e.ResourceID != ids[tc.kind] || e.ActorKeyID == "" ||
			e.ActorName != "test" || e.WorkspaceID != rlWS || e.OrganisationID != rlOrg {
			t.Errorf("%s: entry %+v, want %s of %s %s by the test key", tc.name, e, tc.action, tc.resource, ids[tc.kind])
		}
		if !slices.Equal(e.ChangedFields, tc.fields) {
			t.Errorf("%s: changed_fields %v, want %v", tc.name, e.ChangedFields, tc.fields)
		}
		for _, v := range secrets {
			if strings.Contains(string(raw), v) {
				t.Errorf("%s: the audit entry holds the value %q: %s", tc.name, v, raw)
			}
		}
	}
	// The same tenancy as every entry: another workspace's key lists its
	// own workspace's log, without these.
	resp, raw := rawDo(t, gatewayURL(), http.MethodGet, "/audit-logs?limit=100", nil, "x-gateway-api-key", rlOtherKey)
	if resp.StatusCode != 200 || strings.Contains(string(raw), ids["budget"]) || strings.Contains(string(raw), ids["rl"]) {
		t.Errorf("another workspace's audit log: %d %s", resp.StatusCode, raw)
	}
}
