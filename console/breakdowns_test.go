package console

import (
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// withGroups puts in front of the fake API one that answers the
// analytics groups (one group, its value in the route's field) and the
// key usage the keys page reads.
func withGroups(t *testing.T, h *Handler, f *fakeAPI) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/users" {
			f.mu.Lock()
			f.calls = append(f.calls, r.Method+" "+r.URL.Path)
			f.queries = append(f.queries, r.URL.RawQuery)
			f.mu.Unlock()
			_, _ = io.WriteString(w, `{"object":"list","total":1,"has_more":false,"data":[{"id":"u1","name":"user:alice","type":"workspace","workspace_id":"ws-1","scopes":["completions.write"],"status":"disabled","status_reason":"token_not_allowed"}]}`)
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/v1/analytics/groups/") {
			f.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, r.Method+" "+r.URL.Path)
		f.queries = append(f.queries, r.URL.RawQuery)
		f.mu.Unlock()
		field := map[string]string{"api_key": "api_key", "idp-users": "user", "model": "ai_model", "provider": "provider",
			"workspace": "workspace_id", "status_code": "status_code"}[strings.TrimPrefix(r.URL.Path, "/v1/analytics/groups/")]
		value := map[string]string{"api_key": "team-a", "user": "user:alice", "ai_model": "gpt-4o", "provider": "openai",
			"workspace_id": "ws-1", "status_code": "429"}[field]
		if names := r.URL.Query().Get("api_key_ids"); names != "" {
			value, _, _ = strings.Cut(names, ",") // the first key asked for
		}
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"`+field+`":"`+value+`","requests":12,"total_tokens":340,"cost_usd":"0.0042","error_count":2,"last_seen":"2026-01-01T10:00:00Z"}]}`)
	}))
	t.Cleanup(srv.Close)
	h.API = srv.URL + "/v1"
}

// TestBreakdowns: each dimension reads its groups route once over the
// range, and each row links to the logs filtered by its value and the
// range; the logs page passes that filter on to the logs API.
func TestBreakdowns(t *testing.T) {
	for _, tc := range []struct {
		by, route, value, logsParam, apiParam string
	}{
		{"key", "/v1/analytics/groups/api_key", "team-a", "key", "api_key_ids"},
		{"user", "/v1/analytics/groups/idp-users", "user:alice", "key", "api_key_ids"},
		{"model", "/v1/analytics/groups/model", "gpt-4o", "model", "ai_org_model"},
		{"provider", "/v1/analytics/groups/provider", "openai", "provider", "providers"},
		{"workspace", "/v1/analytics/groups/workspace", "ws-1", "workspace", "workspace_id"},
		{"status", "/v1/analytics/groups/status_code", "429", "status", "status_code"},
	} {
		t.Run(tc.by, func(t *testing.T) {
			h, f, _ := newConsole(t)
			withGroups(t, h, f)
			id, _ := signIn(t, h, adminKey)
			w := serve(h, "GET", "/breakdowns?range=7d&by="+tc.by, nil, id)
			body := w.Body.String()
			if w.Code != 200 || !strings.Contains(body, `data-by="`+tc.by+`"`) || !strings.Contains(body, `<td class="num">12</td>`) {
				t.Fatalf("%d %s", w.Code, body)
			}
			f.mu.Lock()
			var asked []string
			for i, c := range f.calls {
				if strings.HasPrefix(c, "GET /v1/analytics/groups/") {
					asked = append(asked, c+"?"+f.queries[i])
				}
			}
			f.mu.Unlock()
			if len(asked) != 1 || !strings.HasPrefix(asked[0], "GET "+tc.route+"?") || !strings.Contains(asked[0], "time_of_generation_min=") {
				t.Fatalf("asked %v, want one %s over the range", asked, tc.route)
			}
			i := strings.Index(body, `class="drill"`)
			start := strings.LastIndex(body[:i], `href="`) + len(`href="`)
			href := html.UnescapeString(body[start : start+strings.Index(body[start:], `"`)])
			u, err := url.Parse(href)
			if err != nil || u.Path != "/logs" || u.Query().Get(tc.logsParam) != tc.value || u.Query().Get("from") == "" || u.Query().Get("to") == "" {
				t.Fatalf("drill-down %q, want /logs?%s=%s with the range", href, tc.logsParam, tc.value)
			}
			w = serve(h, "GET", href, nil, id)
			if w.Code != 200 {
				t.Fatalf("logs %d %s", w.Code, w.Body)
			}
			f.mu.Lock()
			q, _ := url.ParseQuery(f.queries[len(f.queries)-1])
			last := f.calls[len(f.calls)-1]
			f.mu.Unlock()
			if last != "GET /v1/logs" || q.Get(tc.apiParam) != tc.value || q.Get("time_of_generation_min") == "" {
				t.Fatalf("logs asked %s %v, want %s=%s", last, q, tc.apiParam, tc.value)
			}
		})
	}
}
