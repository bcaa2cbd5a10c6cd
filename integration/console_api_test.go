package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestConsoleScopesThroughGateway signs in to the console of a real
// Caddy with a key that may only list keys: it sees the keys, and every
// write it tries answers the keys API's 403; a POST without the CSRF
// token answers 403 and changes nothing; the admin's writes work.
func TestConsoleScopesThroughGateway(t *testing.T) {
	up := newFakeOpenAI(t)
	consoleSite(t, up.URL)
	var ro struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"reader","scopes":["api_keys.list"]}`, 200, &ro)

	reader := newConsoleClient(t)
	reader.signIn(ro.Key)
	if code, body := reader.send("GET", "/keys", nil); code != 200 || !strings.Contains(body, `id="readonly"`) || !strings.Contains(body, "reader") {
		t.Fatalf("read-only keys page: %d", code)
	}
	for _, tc := range []struct{ path string }{{"/keys/create"}, {"/keys/rotate"}, {"/keys/revoke"}} {
		t.Run("read-only "+tc.path, func(t *testing.T) {
			code, body := reader.send("POST", tc.path, url.Values{"csrf": {reader.csrf}, "id": {ro.ID}, "name": {"x"}})
			if code != http.StatusForbidden || !strings.Contains(body, "missing_scope") {
				t.Fatalf("status %d: %s", code, body)
			}
		})
	}

	admin := newConsoleClient(t)
	admin.signIn(keysAdminKey)
	if code, _ := admin.send("POST", "/keys/create", url.Values{"name": {"no-csrf"}}); code != http.StatusForbidden {
		t.Fatalf("POST without CSRF: %d", code)
	}
	if code, _ := admin.send("POST", "/keys/create", url.Values{"name": {"with-csrf"}, "csrf": {admin.csrf}}); code != http.StatusSeeOther {
		t.Fatalf("create: %d", code)
	}
	_, body := admin.send("GET", "/keys", nil)
	if strings.Contains(body, "no-csrf") || !strings.Contains(body, "with-csrf") || !strings.Contains(body, `id="secret-value"`) {
		t.Fatal("the keys page does not show exactly the key created with the token, with its secret")
	}
	// The reader's key revoked through the console ends its session.
	if code, _ := admin.send("POST", "/keys/revoke", url.Values{"id": {ro.ID}, "csrf": {admin.csrf}}); code != http.StatusSeeOther {
		t.Fatalf("revoke: %d", code)
	}
	if code, _ := reader.send("GET", "/keys", nil); code != http.StatusSeeOther {
		t.Fatalf("a revoked key's console session: %d", code)
	}
	// Never the key in the gateway's log.
	if strings.Contains(readLog(t), keysAdminKey) || strings.Contains(readLog(t), ro.Key) {
		t.Fatal("a gateway key is in the log")
	}
}

// TestConsoleBatches lists a managed batch on the console's batches page
// with its counts, and downloads its output file through the console.
func TestConsoleBatches(t *testing.T) {
	up := newFakeOpenAI(t)
	consoleSite(t, up.URL)
	fileID := uploadBatchFile(t, gatewayURL(), openaiBatchLines(3, 0))
	id := mustCreateBatch(t, gatewayURL(), fileID, "x-gateway-virtual-key", "fake")
	b := waitBatchDone(t, gatewayURL(), id)
	if b.Get("status").Str != "completed" {
		t.Fatalf("batch %s", b.Raw)
	}
	c := newConsoleClient(t)
	c.signIn(keysAdminKey)
	code, body := c.send("GET", "/batches", nil)
	if code != 200 || !strings.Contains(body, `data-batch="`+id+`"`) || !strings.Contains(body, `<td class="status">completed</td>`) {
		t.Fatalf("batches page: %d %s", code, body)
	}
	out := b.Get("output_file_id").Str
	code, content := c.send("GET", "/files/"+out, nil)
	if code != 200 || strings.Count(content, "\n") != 3 || !strings.Contains(content, `"custom_id":"req-1"`) {
		t.Fatalf("output file through the console: %d %q", code, content)
	}
	for _, bad := range []string{"/files/a%20b", "/files/a%3Fb", "/files/" + strings.Repeat("x", 200)} {
		if code, _ := c.send("GET", bad, nil); code != 400 {
			t.Fatalf("GET %s: %d", bad, code)
		}
	}
}

// TestConsoleWorkspaces: a workspace key signed in to the console sees
// its own workspace only: not the other workspace's keys or records.
func TestConsoleWorkspaces(t *testing.T) {
	up := newFakeOpenAI(t)
	consoleSite(t, up.URL)
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", keysAdminKey, "x-gateway-virtual-key", "fake")
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	trace := resp.Header.Get("X-Gateway-Trace-Id")
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"first-ws-key","scopes":["completions.write"]}`, 200, nil)
	syncLedger(t)

	admin := newConsoleClient(t)
	admin.signIn(keysAdminKey)
	if _, body := admin.send("GET", "/logs", nil); !strings.Contains(body, trace) {
		t.Fatal("the organisation key does not see its own record")
	}
	// The overview's totals are the analytics API's, to the nano-dollar.
	end := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	var cost struct {
		Summary struct {
			TotalUSD string `json:"total_usd"`
		} `json:"summary"`
	}
	q := "?time_of_generation_min=" + url.QueryEscape(end.Add(-24*time.Hour).Format(time.RFC3339)) + "&time_of_generation_max=" + url.QueryEscape(end.Format(time.RFC3339))
	as(t, keysAdminKey, "GET", "/analytics/graphs/cost"+q, "", 200, &cost)
	if _, body := admin.send("GET", "/", nil); cost.Summary.TotalUSD == "" || cost.Summary.TotalUSD == "0" || !strings.Contains(body, `id="cost">`+cost.Summary.TotalUSD+`<`) {
		t.Fatalf("the overview's cost is not the API's %q", cost.Summary.TotalUSD)
	}
	other := newConsoleClient(t)
	other.signIn(otherKey)
	for _, tc := range []struct{ page, absent string }{{"/logs", trace}, {"/keys", "first-ws-key"}, {"/", `id="requests">1<`}} {
		code, body := other.send("GET", tc.page, nil)
		if code != 200 || strings.Contains(body, tc.absent) {
			t.Fatalf("%s as the other workspace: %d, shows %q", tc.page, code, tc.absent)
		}
		if tc.page == "/" && !strings.Contains(body, `id="requests">0<`) {
			t.Fatal("the other workspace's overview does not count zero requests")
		}
	}
}

// TestConsoleLogFilters filters the logs page by metadata, trace id and
// time through a real Caddy and ledger.
func TestConsoleLogFilters(t *testing.T) {
	up := newFakeOpenAI(t)
	consoleSite(t, up.URL)
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	send := func(extra ...string) string {
		resp, _ := do(t, "POST", "/chat/completions", chat, append([]string{"x-gateway-api-key", keysAdminKey, "x-gateway-virtual-key", "fake"}, extra...)...)
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %d", resp.StatusCode)
		}
		return resp.Header.Get("X-Gateway-Trace-Id")
	}
	alice, plain := send("x-gateway-metadata", `{"_user":"alice"}`), send()
	syncLedger(t)
	c := newConsoleClient(t)
	c.signIn(keysAdminKey)
	future := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02T15:04")
	for _, tc := range []struct {
		query     string
		want      int
		has, hasn string
	}{
		{"", 200, alice, "\x00"},
		{"?meta=" + url.QueryEscape("_user=alice"), 200, alice, plain},
		{"?trace=" + url.QueryEscape(plain), 200, plain, alice},
		{"?from=" + future, 200, "0 records", alice},
		{"?from=yesterday", 400, "YYYY-MM-DD", alice},
		{"?meta=nokey", 400, "key=value", alice},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, body := c.send("GET", "/logs"+tc.query, nil)
			if code != tc.want || !strings.Contains(body, tc.has) || strings.Contains(body, tc.hasn) {
				t.Fatalf("status %d (want %d); has %q: %v; has %q: %v", code, tc.want, tc.has, strings.Contains(body, tc.has), tc.hasn, strings.Contains(body, tc.hasn))
			}
		})
	}
}

// TestConsoleKeySearchAPI: GET /v1/api-keys?search= finds keys by part of
// the name in any case or by id prefix, within the caller's reach and
// with the Caddyfile's keys; status narrows it; a search beyond the
// bound or an unknown status is a 400. The virtual keys list searches
// the same way.
func TestConsoleKeySearchAPI(t *testing.T) {
	up := newFakeOpenAI(t)
	consoleSite(t, up.URL)
	type created struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	var one, two, beta, lister created
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"Alpha-One","scopes":["completions.write"]}`, 200, &one)
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"alpha-two","workspace_id":"`+keysOtherWS+`","scopes":["completions.write"]}`, 200, &two)
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"beta","scopes":["completions.write"]}`, 200, &beta)
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"lister","scopes":["api_keys.list"]}`, 200, &lister)
	as(t, keysAdminKey, "DELETE", "/api-keys/"+two.ID, "", 200, nil)
	type list struct {
		Total int `json:"total"`
		Data  []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"data"`
	}
	for _, tc := range []struct {
		name, key, query string
		want             []string
	}{
		{"name in any case", keysAdminKey, "search=ALPHA", []string{"Alpha-One", "alpha-two"}},
		{"and a workspace", keysAdminKey, "search=alpha&workspace_id=" + keysOtherWS, []string{"alpha-two"}},
		{"id prefix", keysAdminKey, "search=" + beta.ID[:23], []string{"beta"}},
		{"status", keysAdminKey, "search=alpha&status=revoked", []string{"alpha-two"}},
		{"a Caddyfile key", keysAdminKey, "search=admi", []string{"admin"}},
		{"cursor paging", keysAdminKey, "search=a&status=active&page_size=1&after=" + one.ID, []string{"beta"}},
		{"a workspace key's reach", lister.Key, "search=alpha", []string{"Alpha-One"}},
		{"no match", keysAdminKey, "search=" + url.QueryEscape("zz top"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got list
			as(t, tc.key, "GET", "/api-keys?"+tc.query, "", 200, &got)
			var names []string
			for _, d := range got.Data {
				names = append(names, d.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("found %v (total %d), want %v", names, got.Total, tc.want)
			}
		})
	}
	var all list
	as(t, keysAdminKey, "GET", "/api-keys?search=a&status=active&page_size=1", "", 200, &all)
	if all.Total < 3 || len(all.Data) != 1 {
		t.Fatalf("total %d over a page of %d", all.Total, len(all.Data))
	}
	for _, q := range []string{"search=" + strings.Repeat("x", 129), "status=gone"} {
		raw := as(t, keysAdminKey, "GET", "/api-keys?"+q, "", 400, nil)
		if !strings.Contains(string(raw), "invalid") && !strings.Contains(string(raw), "must") {
			t.Fatalf("%s: %s", q, raw)
		}
	}
	var vks list
	as(t, keysAdminKey, "GET", "/virtual-keys?search=FAK", "", 200, &vks)
	if vks.Total != 1 || vks.Data[0].Name != "fake" {
		t.Fatalf("virtual keys searched: %+v", vks)
	}
	as(t, keysAdminKey, "GET", "/virtual-keys?search=nothing-like-it", "", 200, &vks)
	if vks.Total != 0 {
		t.Fatalf("virtual keys without a match: %+v", vks)
	}
	as(t, keysAdminKey, "GET", "/virtual-keys?search="+strings.Repeat("x", 129), "", 400, nil)
}
