package console

import (
	"net/url"
	"strings"
	"testing"
)

// TestKeysUse: the keys page shows each key's requests, spend, last use,
// expiry and workspace, read with one grouped ledger query for the page
// (named by the page's keys), and none for a key without analytics.view.
func TestKeysUse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     string
		queries int
		want    []string
	}{
		{"admin", adminKey, 1, []string{`<td class="num requests">12</td>`, `<td class="num spend">0.0042</td>`, `<td class="last-use">2026-01-01 10:00:00Z</td>`, `<td class="expires">never</td>`}},
		{"no analytics scope", roKey, 0, []string{`id="use-error"`, `analytics.view`, `<td class="num requests">0</td>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f, _ := newConsole(t)
			withGroups(t, h, f)
			id, _ := signIn(t, h, tc.key)
			w := serve(h, "GET", "/keys", nil, id)
			for _, s := range tc.want {
				if w.Code != 200 || !strings.Contains(w.Body.String(), s) {
					t.Fatalf("%d: %q missing in %s", w.Code, s, w.Body)
				}
			}
			f.mu.Lock()
			n := 0
			for i, c := range f.calls {
				if c == "GET /v1/analytics/groups/api_key" {
					n++
					if !strings.Contains(f.queries[i], "api_key_ids=team-a") {
						t.Errorf("the usage query is not narrowed to the page's keys: %s", f.queries[i])
					}
				}
			}
			f.mu.Unlock()
			if n != tc.queries {
				t.Errorf("%d usage queries, want %d", n, tc.queries)
			}
		})
	}
}

// lastQuery is the query of the last call to call ("GET /v1/api-keys").
func (f *fakeAPI) lastQuery(call string) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.calls) - 1; i >= 0; i-- {
		if f.calls[i] == call {
			q, _ := url.ParseQuery(f.queries[i])
			return q
		}
	}
	return nil
}

// TestUsersPage: the users page lists the API's users with each one's
// requests and spend from one grouped query named by the page's users,
// its status and reason, and a link to its logs.
func TestUsersPage(t *testing.T) {
	h, f, _ := newConsole(t)
	withGroups(t, h, f)
	id, _ := signIn(t, h, adminKey)
	w := serve(h, "GET", "/users?search=ali&status=disabled", nil, id)
	body := w.Body.String()
	for _, s := range []string{`data-user="user:alice"`, `<td class="num requests">12</td>`, `disabled (token_not_allowed)`, `/logs?key=user%3aalice`} {
		if w.Code != 200 || !strings.Contains(body, s) {
			t.Fatalf("%d: %q missing in %s", w.Code, s, body)
		}
	}
	if q := f.lastQuery("GET /v1/users"); q.Get("search") != "ali" || q.Get("status") != "disabled" {
		t.Fatalf("users asked %v", q)
	}
	if q := f.lastQuery("GET /v1/analytics/groups/api_key"); q.Get("api_key_ids") != "user:alice" {
		t.Fatalf("usage asked %v", q)
	}
}
