package ledgerapi

import (
	"context"
	"strconv"
	"testing"
	"time"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// TestLedgerAPI: the ledger module alone (cptest), on the embedded SQLite
// ledger: routes × scopes × tenancy.
func TestLedgerAPI(t *testing.T) {
	e := cp.New(t, "ledger", nil)
	db := e.App.LedgerDB()
	if db == nil {
		t.Fatal("no ledger")
	}
	now := time.Now().UTC()
	rec := func(trace, key, ws, org string) ledger.Record {
		return ledger.Record{Time: now.Add(-time.Minute), TraceID: trace, APIKey: key, Workspace: ws, Organisation: org,
			Provider: "openai", Model: "gpt-4o-mini", Operation: "chat", Status: 200, InputTokens: 10, OutputTokens: 5, Latency: time.Second}
	}
	if err := db.Insert(context.Background(), []ledger.Record{
		rec("trace-own", cp.Member, cp.Workspace, cp.Org),
		rec("trace-ws2", cp.Member2, cp.Workspace2, cp.Org),
		rec("trace-other", cp.Outsider, cp.OtherWS, cp.OtherOrg),
		rec("trace-user", "user:alice", cp.Workspace2, cp.Org),
	}); err != nil {
		t.Fatal(err)
	}
	w := e.Do(cp.Member, "GET", "/v1/logs", "")
	var ownID string
	if recs, _, _, err := db.Logs(context.Background(), &ledger.Filter{Organisation: cp.Org, Workspace: cp.Workspace}, 10, 0); err != nil || len(recs) != 1 {
		t.Fatalf("logs %v %v (%s)", recs, err, w.Body)
	} else {
		ownID = strconv.FormatInt(recs[0].ID, 10)
	}
	e.Run(t, []cp.Case{
		{Name: "own logs", Key: cp.Member, Method: "GET", Path: "/v1/logs", Status: 200, Contains: "trace-own", Lacks: "trace-ws2"},
		{Name: "own log", Key: cp.Member, Method: "GET", Path: "/v1/logs/" + ownID, Status: 200, Contains: "trace-own"},
		{Name: "another workspace's log", Key: cp.Member2, Method: "GET", Path: "/v1/logs/" + ownID, Status: 404},
		{Name: "another organisation's log", Key: cp.Outsider, Method: "GET", Path: "/v1/logs/" + ownID, Status: 404},
		{Name: "org key: its organisation", Key: cp.Admin, Method: "GET", Path: "/v1/logs", Status: 200, Contains: "trace-ws2", Lacks: "trace-other"},
		{Name: "org key: one workspace", Key: cp.Admin, Method: "GET", Path: "/v1/logs?workspace_id=" + cp.Workspace2, Status: 200, Contains: "trace-ws2", Lacks: "trace-own"},
		{Name: "org key: another organisation's workspace", Key: cp.Admin, Method: "GET", Path: "/v1/logs?workspace_id=" + cp.OtherWS, Status: 403, Code: "workspace_forbidden"},
		{Name: "workspace key: another workspace", Key: cp.Member, Method: "GET", Path: "/v1/logs?workspace_id=" + cp.Workspace2, Status: 403, Code: "workspace_forbidden"},
		{Name: "no scope", Key: cp.Reader, Method: "GET", Path: "/v1/logs/" + ownID, Status: 403, Code: "missing_scope"},
		{Name: "no analytics scope", Key: cp.Reader, Method: "GET", Path: "/v1/analytics/graphs/requests", Status: 403, Code: "missing_scope"},
		{Name: "graph", Key: cp.Member, Method: "GET", Path: "/v1/analytics/graphs/requests", Status: 200},
		{Name: "graph by hours over a week", Key: cp.Member, Method: "GET", Path: "/v1/analytics/graphs/requests?bucket=hour&time_of_generation_min=" + now.Add(-7*24*time.Hour).Format(time.RFC3339), Status: 200, Contains: `"timestamp":"` + now.Add(-time.Minute).Truncate(time.Hour).Format(time.RFC3339)},
		{Name: "graph bucket unknown", Key: cp.Member, Method: "GET", Path: "/v1/analytics/graphs/cost?bucket=second", Status: 400, Contains: "bucket"},
		{Name: "graph bucket too many points", Key: cp.Member, Method: "GET", Path: "/v1/analytics/graphs/tokens?bucket=minute&time_of_generation_min=" + now.Add(-24*time.Hour).Format(time.RFC3339), Status: 400, Contains: "1000 points"},
		{Name: "identity-provider users", Key: cp.Member2, Method: "GET", Path: "/v1/analytics/groups/idp-users", Status: 200, Contains: `"user":"user:alice"`, Lacks: cp.Member2},
		{Name: "identity-provider users, past the last page", Key: cp.Member2, Method: "GET", Path: "/v1/analytics/groups/idp-users?current_page=1&page_size=1", Status: 200, Contains: `"total":1`, Lacks: "alice"},
		{Name: "groups", Key: cp.Admin, Method: "GET", Path: "/v1/analytics/groups/workspaces", Status: 200, Contains: cp.Workspace2, Lacks: cp.OtherWS},
		{Name: "usage/me needs no scope", Key: cp.Reader, Method: "GET", Path: "/v1/usage/me", Status: 200},
		{Name: "unserved under /v1/logs/", Key: cp.Member, Method: "POST", Path: "/v1/logs/exports", Status: 404},
	})
}
