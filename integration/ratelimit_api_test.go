package integration

import (
	"net/http"
	"strings"
	"testing"
)

var validPolicy = `{"type":"requests","unit":"rpm","value":5,"name":"per key","conditions":[{"key":"workspace_id","value":"` + rlWS + `"}],"group_by":[{"key":"api_key"}]}`

// TestPolicyAPICreateValidation checks that every violation of the create
// body is a 400 naming the field, and that nothing is stored for it.
func TestPolicyAPICreateValidation(t *testing.T) {
	loadRL(t, rlSite{})
	conds := `"conditions":[{"key":"api_key","value":"*"}]`
	group := `"group_by":[{"key":"api_key"}]`
	tests := []struct {
		name, body, field string
	}{
		{"missing conditions", `{"type":"requests","unit":"rpm","value":1,` + group + `}`, "conditions"},
		{"empty conditions", `{"type":"requests","unit":"rpm","value":1,"conditions":[],` + group + `}`, "conditions"},
		{"missing group_by", `{"type":"requests","unit":"rpm","value":1,` + conds + `}`, "group_by"},
		{"empty group_by", `{"type":"requests","unit":"rpm","value":1,` + conds + `,"group_by":[]}`, "group_by"},
		{"missing type", `{"unit":"rpm","value":1,` + conds + `,` + group + `}`, "type"},
		{"bad type", `{"type":"dollars","unit":"rpm","value":1,` + conds + `,` + group + `}`, "type"},
		{"missing unit", `{"type":"requests","value":1,` + conds + `,` + group + `}`, "unit"},
		{"bad unit", `{"type":"requests","unit":"rps","value":1,` + conds + `,` + group + `}`, "unit"},
		{"missing value", `{"type":"requests","unit":"rpm",` + conds + `,` + group + `}`, "value"},
		{"zero value", `{"type":"requests","unit":"rpm","value":0,` + conds + `,` + group + `}`, "value"},
		{"negative value", `{"type":"requests","unit":"rpm","value":-3,` + conds + `,` + group + `}`, "value"},
		{"string value", `{"type":"requests","unit":"rpm","value":"5",` + conds + `,` + group + `}`, "value"},
		{"name too long", `{"type":"requests","unit":"rpm","value":1,"name":"` + strings.Repeat("n", 256) + `",` + conds + `,` + group + `}`, "name"},
		{"unknown condition key", `{"type":"requests","unit":"rpm","value":1,"conditions":[{"key":"user","value":"x"}],` + group + `}`, "conditions[0].key"},
		{"empty condition value", `{"type":"requests","unit":"rpm","value":1,"conditions":[{"key":"api_key","value":""}],` + group + `}`, "conditions[0].value"},
		{"unknown group_by key", `{"type":"requests","unit":"rpm","value":1,` + conds + `,"group_by":[{"key":"ip"}]}`, "group_by[0].key"},
		{"not a UUID organisation", `{"type":"requests","unit":"rpm","value":1,"organisation_id":"acme",` + conds + `,` + group + `}`, "organisation_id"},
		{"another organisation", `{"type":"requests","unit":"rpm","value":1,"organisation_id":"` + rlOtherWS + `",` + conds + `,` + group + `}`, "organisation_id"},
		{"another workspace", `{"type":"requests","unit":"rpm","value":1,"workspace_id":"` + rlOtherWS + `",` + conds + `,` + group + `}`, "workspace_id"},
		{"malformed JSON", `{"type":`, "body"},
		{"no body", ``, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := api(t, gatewayKey, http.MethodPost, "/policies/rate-limits", tt.body)
			if status != 400 || errParam(m) != tt.field || errField(m, "type") != "invalid_request_error" {
				t.Fatalf("got %d %v, want 400 naming %s", status, m, tt.field)
			}
		})
	}
	// A 255-character name is within bounds; the key's own workspace and
	// organisation may be repeated.
	createPolicy(t, gatewayKey, `{"type":"tokens","unit":"rpd","value":1,"name":"`+strings.Repeat("n", 255)+`","workspace_id":"`+rlWS+`","organisation_id":"`+rlOrg+`",`+conds+`,`+group+`}`)
	_, list := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits", "")
	if data, _ := list["data"].([]any); len(data) != 1 {
		t.Fatalf("invalid bodies were stored: %v", list)
	}
}

// TestPolicyAPILifecycle walks a policy through create, get, list, update
// and archive, and checks that other workspaces cannot see it.
func TestPolicyAPILifecycle(t *testing.T) {
	loadRL(t, rlSite{})
	id := createPolicy(t, gatewayKey, validPolicy)
	if len(id) != 36 {
		t.Fatalf("id %q", id)
	}

	status, p := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+id, "")
	if status != 200 {
		t.Fatalf("get: %d %v", status, p)
	}
	for k, want := range map[string]any{"id": id, "object": "policy_rate_limits", "type": "requests", "unit": "rpm", "value": 5.0,
		"status": "active", "workspace_id": rlWS, "organisation_id": rlOrg, "name": "per key"} {
		if p[k] != want {
			t.Errorf("%s = %v, want %v", k, p[k], want)
		}
	}
	for _, k := range []string{"created_at", "last_updated_at"} {
		if s, _ := p[k].(string); len(s) < 20 || s[10] != 'T' {
			t.Errorf("%s = %v, want a date-time", k, p[k])
		}
	}
	if c, _ := p["conditions"].([]any); len(c) != 1 {
		t.Errorf("conditions %v", p["conditions"])
	}
	if status, _ := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+id+"?status=archived", ""); status != 404 {
		t.Errorf("archived view of an active policy: %d", status)
	}
	if status, m := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/not-a-uuid", ""); status != 400 || errParam(m) != "rateLimitsPolicyId" {
		t.Errorf("non-UUID id: %d %v", status, m)
	}
	if status, m := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+id+"?status=deleted", ""); status != 400 || errParam(m) != "status" {
		t.Errorf("unknown status: %d %v", status, m)
	}
	if status, _ := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/00000000-0000-4000-8000-000000000000", ""); status != 404 {
		t.Errorf("unknown id: %d", status)
	}

	// Another workspace's key sees nothing of it, whatever it tries.
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		if status, _ := api(t, rlOtherKey, m, "/policies/rate-limits/"+id, `{"value":1}`); status != 404 {
			t.Errorf("other workspace %s: %d", m, status)
		}
	}
	if _, l := api(t, rlOtherKey, http.MethodGet, "/policies/rate-limits", ""); len(l["data"].([]any)) != 0 {
		t.Errorf("other workspace lists %v", l)
	}
	// A key of the same workspace sees it.
	if status, _ := api(t, rlSecondKey, http.MethodGet, "/policies/rate-limits/"+id, ""); status != 200 {
		t.Errorf("same workspace: %d", status)
	}

	// Update.
	status, p = api(t, gatewayKey, http.MethodPut, "/policies/rate-limits/"+id, `{"value":7,"name":null,"group_by":[{"key":"api_key"},{"key":"model"}]}`)
	if status != 200 || p["value"] != 7.0 || p["name"] != nil || len(p["group_by"].([]any)) != 2 || p["object"] != "policy_rate_limits" {
		t.Fatalf("update: %d %v", status, p)
	}
	for body, field := range map[string]string{
		`{"value":0}`: "value", `{"conditions":[]}`: "conditions", `{"group_by":[]}`: "group_by", `{"type":"tokens"}`: "type",
		`{"unit":"rps"}`: "unit", `{"name":"` + strings.Repeat("n", 256) + `"}`: "name", `{"status":"archived"}`: "status",
	} {
		if status, m := api(t, gatewayKey, http.MethodPut, "/policies/rate-limits/"+id, body); status != 400 || errParam(m) != field {
			t.Errorf("update %s: %d %v", body, status, m)
		}
	}
	if _, p = api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+id, ""); p["value"] != 7.0 {
		t.Errorf("rejected updates changed the policy: %v", p)
	}

	// Archive.
	status, p = api(t, gatewayKey, http.MethodDelete, "/policies/rate-limits/"+id, "")
	if status != 200 || p["status"] != "archived" {
		t.Fatalf("archive: %d %v", status, p)
	}
	if status, _ := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+id, ""); status != 404 {
		t.Errorf("active view of an archived policy: %d", status)
	}
	if status, p := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits/"+id+"?status=archived", ""); status != 200 || p["status"] != "archived" {
		t.Errorf("archived view: %d %v", status, p)
	}
	if status, _ := api(t, gatewayKey, http.MethodDelete, "/policies/rate-limits/"+id, ""); status != 200 {
		t.Errorf("archiving twice: %d", status)
	}
	if status, m := api(t, gatewayKey, http.MethodPatch, "/policies/rate-limits/"+id, `{}`); status != 405 {
		t.Errorf("PATCH: %d %v", status, m)
	}
}

// TestPolicyAPIList checks cursor pagination and the status filter.
func TestPolicyAPIList(t *testing.T) {
	loadRL(t, rlSite{})
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, createPolicy(t, gatewayKey, validPolicy))
	}
	createPolicy(t, rlOtherKey, strings.Replace(validPolicy, rlWS, rlOtherWS, 1))
	if status, _ := api(t, gatewayKey, http.MethodDelete, "/policies/rate-limits/"+ids[1], ""); status != 200 {
		t.Fatal("archive failed")
	}

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		path := "/policies/rate-limits?limit=2"
		if after != "" {
			path += "&after=" + after
		}
		status, l := api(t, gatewayKey, http.MethodGet, path, "")
		if status != 200 || l["object"] != "list" {
			t.Fatalf("list: %d %v", status, l)
		}
		data := l["data"].([]any)
		for _, d := range data {
			got = append(got, d.(map[string]any)["id"].(string))
		}
		if len(data) > 0 && (l["first_id"] != data[0].(map[string]any)["id"] || l["last_id"] != data[len(data)-1].(map[string]any)["id"]) {
			t.Fatalf("first_id/last_id %v", l)
		}
		if l["has_more"] != true {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		after = l["last_id"].(string)
	}
	// One page in full gives the order (oldest first, ids breaking ties
	// within a millisecond); the pages must walk it exactly.
	_, l := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits?limit=100", "")
	var full []string
	for _, d := range l["data"].([]any) {
		full = append(full, d.(map[string]any)["id"].(string))
	}
	if strings.Join(got, ",") != strings.Join(full, ",") {
		t.Fatalf("pages listed %v, the full listing is %v", got, full)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, id := range full {
		if !want[id] {
			t.Fatalf("listed %s, not a policy of this workspace", id)
		}
		delete(want, id)
	}
	if len(want) != 0 {
		t.Fatalf("not listed: %v", want)
	}

	_, l = api(t, gatewayKey, http.MethodGet, "/policies/rate-limits?status=active", "")
	if data := l["data"].([]any); len(data) != 4 || l["has_more"] != false {
		t.Fatalf("active only: %v", l)
	}
	_, l = api(t, gatewayKey, http.MethodGet, "/policies/rate-limits?status=archived", "")
	if data := l["data"].([]any); len(data) != 1 || l["first_id"] != ids[1] {
		t.Fatalf("archived only: %v", l)
	}
	_, l = api(t, gatewayKey, http.MethodGet, "/policies/rate-limits?limit=1", "")
	if len(l["data"].([]any)) != 1 || l["has_more"] != true {
		t.Fatalf("limit=1: %v", l)
	}
	for q, field := range map[string]string{"limit=0": "limit", "limit=101": "limit", "limit=x": "limit", "status=x": "status",
		"after=00000000-0000-4000-8000-000000000000": "after"} {
		if status, m := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits?"+q, ""); status != 400 || errParam(m) != field {
			t.Errorf("%s: %d %v", q, status, m)
		}
	}
	_, l = api(t, gatewayKey, http.MethodGet, "/policies/rate-limits?limit=100&after="+full[len(full)-1], "")
	if len(l["data"].([]any)) != 0 || l["has_more"] != false || l["first_id"] != nil {
		t.Fatalf("after the last: %v", l)
	}
}
