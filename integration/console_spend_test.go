package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// spendReport is GET /v1/policies/usage-limits/usage's answer.
type spendReport struct {
	Total     int  `json:"total"`
	HasMore   bool `json:"has_more"`
	Truncated bool `json:"truncated"`
	Data      []struct {
		PolicyID    string            `json:"policy_id"`
		Name        *string           `json:"name"`
		WorkspaceID string            `json:"workspace_id"`
		Group       map[string]string `json:"group"`
		CreditLimit float64           `json:"credit_limit"`
		Used        float64           `json:"used"`
		Remaining   float64           `json:"remaining"`
		Status      string            `json:"status"`
	} `json:"data"`
	PerRequest []struct {
		PolicyID string `json:"policy_id"`
	} `json:"per_request"`
}

// TestBudgetSpendReport: through a real Caddy, GET
// /v1/policies/usage-limits/usage and the console's budgets page show a
// key that may read budgets every key's spend within its reach, from the
// same counters the key's own usage view reads, the exhausted first; a
// key that may not read budgets is refused the report (403) and its page
// keeps its own spend; another organisation's limits and keys are never
// shown, to either side.
func TestBudgetSpendReport(t *testing.T) {
	up := newFakeOpenAI(t)
	os.Setenv("TEST_KEYS_O2_ADMIN", o2Admin)
	consoleSiteWith(t, up.URL, filepath.Join(t.TempDir(), "ledger.db"), `api_key o2admin {env.TEST_KEYS_O2_ADMIN} {
			organisation_id `+o2Org+`
			workspace_id `+o2WS+`
			type organisation
			scopes *
		}`)
	spender := wsKey(t, keysAdminKey, keysWorkspace, "spender", `"scopes":["completions.write"]`)
	reader := wsKey(t, keysAdminKey, keysWorkspace, "budget-reader", `"scopes":["usage_limits.read"]`)
	lister := wsKey(t, keysAdminKey, keysWorkspace, "budget-lister", `"scopes":["usage_limits.list"]`)
	policy := func(key, body string) string {
		var p struct {
			ID string `json:"id"`
		}
		as(t, key, "POST", "/policies/usage-limits", body, 200, &p)
		return p.ID
	}
	// Every key of the workspace, $10 a month each; the spender alone on
	// a tiny one it exhausts; the other workspace's own; o2's own.
	team := policy(keysAdminKey, `{"name":"team","type":"cost","credit_limit":10,"periodic_reset":"monthly","workspace_id":"`+keysWorkspace+`",
		"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
	tiny := policy(keysAdminKey, `{"name":"tiny","type":"cost","credit_limit":0.000001,"periodic_reset":"monthly","workspace_id":"`+keysWorkspace+`",
		"conditions":[{"key":"api_key","value":"spender"}],"group_by":[{"key":"api_key"}]}`)
	otherWS := policy(otherKey, `{"name":"other-ws","type":"cost","credit_limit":10,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
	o2 := policy(o2Admin, `{"name":"o2-budget","type":"cost","credit_limit":10,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
	perModel := policy(keysAdminKey, `{"name":"per-model","type":"tokens","credit_limit":100000,"workspace_id":"`+keysWorkspace+`",
		"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"model"}]}`)
	// One group whatever the key: the virtual key's.
	viaFake := policy(keysAdminKey, `{"name":"via-fake","type":"cost","credit_limit":10,"workspace_id":"`+keysWorkspace+`",
		"conditions":[{"key":"virtual_key","value":"fake"}],"group_by":[{"key":"virtual_key"}]}`)
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	for _, k := range []string{spender.Key, o2Admin} {
		if resp, raw := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", k, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, raw)
		}
	}
	// The spender's own view of its budgets: what the report must repeat.
	var mine struct {
		Limits []struct {
			PolicyID  string  `json:"policy_id"`
			Used      float64 `json:"used"`
			Remaining float64 `json:"remaining"`
		} `json:"usage_limits"`
	}
	as(t, spender.Key, "GET", "/usage/me", "", 200, &mine)
	own := map[string][2]float64{}
	for _, l := range mine.Limits {
		own[l.PolicyID] = [2]float64{l.Used, l.Remaining}
	}
	if own[team][0] <= 0 || own[tiny][1] != 0 {
		t.Fatalf("the spender's own usage %+v: want spend on team and tiny exhausted", mine.Limits)
	}

	for _, tc := range []struct {
		name  string
		key   string
		sees  []string // "<policy id> <api_key>" groups the report must hold
		hides []string // policy ids, or groups, it must not
	}{
		{"the organisation admin sees every workspace", keysAdminKey,
			[]string{tiny + " spender", team + " spender", team + " budget-reader", team + " admin", otherWS + " other", viaFake + " "}, []string{o2}},
		{"a workspace budget reader sees its workspace", reader.Key,
			// Not the organisation key of its workspace: the keys API
			// does not show it that key either.
			[]string{tiny + " spender", team + " spender", team + " test", viaFake + " "}, []string{otherWS, o2, team + " admin"}},
		{"the other organisation sees only its own", o2Admin,
			[]string{o2 + " o2admin"}, []string{team, tiny, otherWS, perModel, viaFake}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rep spendReport
			raw := as(t, tc.key, "GET", "/policies/usage-limits/usage?limit=100", "", 200, &rep)
			got := map[string]int{}
			for i, d := range rep.Data {
				got[d.PolicyID+" "+d.Group["api_key"]] = i
			}
			for _, g := range tc.sees {
				if _, ok := got[g]; !ok {
					t.Errorf("the report lacks the group %s: %s", g, raw)
				}
			}
			for _, id := range tc.hides {
				if _, ok := got[id]; ok || !strings.Contains(id, " ") && strings.Contains(string(raw), id) {
					t.Errorf("the report shows %s: %s", id, raw)
				}
			}
			foreign := []string{o2Org, o2WS}
			if tc.key == o2Admin {
				foreign = []string{keysOrg, keysWorkspace, keysOtherWS}
			}
			for _, id := range foreign {
				if strings.Contains(string(raw), id) {
					t.Errorf("the report names another organisation's %s", id)
				}
			}
			if i, ok := got[tiny+" spender"]; ok {
				d := rep.Data[i]
				if i != 0 || d.Status != "exhausted" || d.Remaining != 0 || d.Used != own[tiny][0] || d.Used <= d.CreditLimit {
					t.Errorf("the exhausted group is %d-th, %+v; want first, exhausted, used %v (past its limit, not capped)", i, d, own[tiny][0])
				}
			}
			if i, ok := got[team+" spender"]; ok && (rep.Data[i].Used != own[team][0] || rep.Data[i].Remaining != own[team][1]) {
				t.Errorf("the spender's team group %+v, its own view says %v", rep.Data[i], own[team])
			}
		})
	}
	var rep spendReport
	as(t, keysAdminKey, "GET", "/policies/usage-limits/usage", "", 200, &rep)
	if len(rep.PerRequest) != 1 || rep.PerRequest[0].PolicyID != perModel {
		t.Errorf("per-request limits %+v, want only per-model", rep.PerRequest)
	}
	// Pages: one group at a time, in the same order.
	var first, second spendReport
	as(t, keysAdminKey, "GET", "/policies/usage-limits/usage?limit=1", "", 200, &first)
	as(t, keysAdminKey, "GET", "/policies/usage-limits/usage?limit=1&offset=1", "", 200, &second)
	if len(first.Data) != 1 || len(second.Data) != 1 || !first.HasMore || first.Total != rep.Total ||
		first.Data[0].PolicyID != rep.Data[0].PolicyID || second.Data[0].Group["api_key"]+second.Data[0].PolicyID != rep.Data[1].Group["api_key"]+rep.Data[1].PolicyID {
		t.Errorf("paging: %+v then %+v of %+v", first, second, rep)
	}
	// Refusals: scope first, then bounds.
	for _, tc := range []struct {
		key, query string
		status     int
		code       string
	}{
		{lister.Key, "", http.StatusForbidden, "missing_scope"},
		{spender.Key, "", http.StatusForbidden, "missing_scope"},
		{keysAdminKey, "?limit=0", http.StatusBadRequest, ""},
		{keysAdminKey, "?limit=101", http.StatusBadRequest, ""},
		{keysAdminKey, "?offset=-1", http.StatusBadRequest, ""},
		{keysAdminKey, "?offset=" + strconv.Itoa(1001), http.StatusBadRequest, ""},
		{keysAdminKey, "?limit=ten", http.StatusBadRequest, ""},
	} {
		raw := as(t, tc.key, "GET", "/policies/usage-limits/usage"+tc.query, "", tc.status, nil)
		if tc.code != "" && errCode(t, raw) != tc.code {
			t.Errorf("%s: code %s", tc.query, raw)
		}
	}

	// The console: each key's budgets page, by scope.
	for _, tc := range []struct {
		name        string
		key         string
		spendTable  bool
		sees, hides []string
	}{
		{"the admin's page shows the spender's spend", keysAdminKey, true,
			[]string{`data-policy="tiny" data-group="api_key=spender" class="exhausted"`, `data-policy="team" data-group="api_key=spender"`, `data-policy="other-ws" data-group="api_key=other"`},
			[]string{"o2-budget", "o2admin"}},
		{"the reader's page shows its workspace", reader.Key, true,
			[]string{`data-policy="team" data-group="api_key=spender"`}, []string{"other-ws", "o2-budget"}},
		{"the lister's page shows only its own spend", lister.Key, false, nil, []string{"api_key=spender", "o2-budget"}},
		{"the other organisation's page shows its own", o2Admin, true,
			[]string{`data-policy="o2-budget" data-group="api_key=o2admin"`}, []string{"api_key=spender", `"team"`, "other-ws"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConsoleClient(t)
			// Not signIn: these keys may not see the keys page it opens.
			if code, body := c.send("POST", "/signin", url.Values{"key": {tc.key}}); code != http.StatusSeeOther {
				t.Fatalf("sign-in: %d %s", code, body)
			}
			code, body := c.send("GET", "/budgets", nil)
			if code != 200 {
				t.Fatalf("budgets page: %d %s", code, body)
			}
			if strings.Contains(body, `id="spend"`) != tc.spendTable {
				t.Fatalf("spend table shown: %v, want %v", !tc.spendTable, tc.spendTable)
			}
			for _, s := range tc.sees {
				if !strings.Contains(body, s) {
					t.Errorf("the page lacks %s", s)
				}
			}
			for _, s := range tc.hides {
				if strings.Contains(body, s) {
					t.Errorf("the page shows %s", s)
				}
			}
		})
	}
	if b, _ := json.Marshal(rep); strings.Contains(readLog(t), spender.Key) || strings.Contains(string(b), spender.Key) {
		t.Fatal("a gateway key is in the log or the report")
	}
}
