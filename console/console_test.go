package console

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

const (
	adminKey = "gw-admin-0123456789"
	roKey    = "gw-readonly-0123456789"
)

// fakeAPI answers the gateway APIs the console calls: writes need the
// admin key (a read-only key gets the API's 403), reads any known key.
type fakeAPI struct {
	mu    sync.Mutex
	calls []string
	keys  []string
	// last is the body of the last write.
	last string
	// queries are the calls' query strings.
	queries []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.queries = append(f.queries, r.URL.RawQuery)
	f.keys = append(f.keys, r.Header.Get("x-gateway-api-key"))
	if r.Method != http.MethodGet {
		b, _ := io.ReadAll(r.Body)
		f.last = string(b)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodGet && r.Header.Get("x-gateway-api-key") != adminKey {
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":{"message":"the key lacks the scope api_keys.create","type":"permission_error","code":"missing_scope"}}`)
		return
	}
	switch {
	case r.URL.Path == "/v1/api-keys" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"id":"k1","key":"gw-AbCd****","name":"team-a","status":"active","scopes":["completions.write"]}],"has_more":false}`)
	case r.URL.Path == "/v1/api-keys/k1" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"id":"k1","name":"team-a","status":"active","scopes":["completions.write"],"allowed_models":["gpt-4o*"],"usage_limits":{"credit_limit":5,"periodic_reset":"weekly"},"defaults":{"virtual_key":"vk1","metadata":{"team":"a"}}}`)
	case strings.HasPrefix(r.URL.Path, "/v1/api-keys/workspace/"):
		_, _ = io.WriteString(w, `{"id":"k2","key":"gw-new-secret-value","object":"api-key"}`)
	case strings.HasPrefix(r.URL.Path, "/v1/api-keys/"):
		_, _ = io.WriteString(w, `{}`)
	case strings.HasPrefix(r.URL.Path, "/v1/analytics/graphs/"):
		_, _ = io.WriteString(w, `{"summary":{"total":3,"total_usd":"0.01"},"data_points":[{"timestamp":"2026-01-01T00:00:00Z","total":3,"total_usd":"0.01"}]}`)
	case r.URL.Path == "/v1/policies/usage-limits/usage" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"object":"list","total":2,"has_more":false,"truncated":false,"data":[`+
			`{"policy_id":"b1","name":"team","type":"cost","group":{"api_key":"team-b"},"credit_limit":5,"used":5.5,"remaining":0,"periodic_reset":"monthly","period_end":"2026-02-01T00:00:00Z","status":"exhausted"},`+
			`{"policy_id":"api_key:k1","name":null,"type":"cost","group":{"api_key":"team-a"},"credit_limit":5,"used":1.25,"remaining":3.75,"periodic_reset":"weekly","period_end":"2026-01-05T00:00:00Z","status":"active"}],`+
			`"per_request":[{"policy_id":"b2","name":"per model","group_by":[{"key":"model"}]}]}`)
	case r.URL.Path == "/v1/policies/usage-limits" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"id":"b1","name":"team","type":"cost","credit_limit":5,"periodic_reset":"monthly","status":"active"}]}`)
	case r.URL.Path == "/v1/policies/usage-limits/b1" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"id":"b1","name":"team","type":"cost","credit_limit":5,"periodic_reset":"monthly","status":"active","workspace_id":"w"}`)
	case strings.HasPrefix(r.URL.Path, "/v1/policies/usage-limits"):
		_, _ = io.WriteString(w, `{"id":"b1"}`)
	case r.URL.Path == "/v1/policies/rate-limits" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"r1","name":"per-key","type":"requests","unit":"rpm","value":60,"status":"active","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}],"has_more":false}`)
	case strings.HasPrefix(r.URL.Path, "/v1/policies/rate-limits"):
		_, _ = io.WriteString(w, `{"id":"r1"}`)
	case r.URL.Path == "/v1/usage/me":
		_, _ = io.WriteString(w, `{"usage_limits":[{"policy_id":"b1","used":1.25,"remaining":3.75}]}`)
	case r.URL.Path == "/v1/virtual-keys" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"slug":"vk1","name":"openai","ai_provider_name":"openai","masked_api_key":"sk****yz","status":"active"}]}`)
	case strings.HasPrefix(r.URL.Path, "/v1/virtual-keys"):
		_, _ = io.WriteString(w, `{}`)
	case r.URL.Path == "/v1/configs" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"slug":"c1","name":"c","versions":1}]}`)
	case r.URL.Path == "/v1/configs/c1" && r.Method == http.MethodGet:
		_, _ = io.WriteString(w, `{"slug":"c1","name":"c","config":{"retry":{"attempts":2}}}`)
	case r.URL.Path == "/v1/configs/c1/versions":
		_, _ = io.WriteString(w, `{"object":"list","data":[{"version_id":"v1","config":{"retry":{"attempts":2}}}]}`)
	case strings.HasPrefix(r.URL.Path, "/v1/configs"):
		_, _ = io.WriteString(w, `{}`)
	case r.URL.Path == "/v1/prompts":
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"id":"p1","slug":"greet","name":"greet","model":"m"}]}`)
	case r.URL.Path == "/v1/prompts/p1":
		_, _ = io.WriteString(w, `{"id":"p1","slug":"greet","name":"greet"}`)
	case r.URL.Path == "/v1/prompts/p1/versions":
		_, _ = io.WriteString(w, `{"object":"list","data":[{"prompt_version":1,"prompt_template":"[{\"role\":\"user\",\"content\":\"Hi {{n}}\"}]","published":true}]}`)
	case strings.HasSuffix(r.URL.Path, "/render"):
		_, _ = io.WriteString(w, `{"success":true,"data":{"messages":[{"role":"user","content":"Hi Ada"}]}}`)
	case r.URL.Path == "/v1/batches":
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"batch_1","status":"in_progress","endpoint":"/v1/chat/completions","request_counts":{"total":3,"completed":1,"failed":0}}],"has_more":false}`)
	case r.URL.Path == "/v1/logs":
		_, _ = io.WriteString(w, `{"object":"list","total":1,"data":[{"id":"1","trace_id":"tr-1","api_key":"team-a","model":"m","status":200}]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"no"}}`)
	}
}

func (f *fakeAPI) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if !strings.HasPrefix(c, "GET ") {
			n++
		}
	}
	return n
}

// newConsole is a console over a fake API, accepting the admin key
// (every scope) and a read-only key (api_keys.list only).
func newConsole(t *testing.T) (*Handler, *fakeAPI, *map[string]bool) {
	t.Helper()
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	accepted := map[string]bool{adminKey: true, roKey: true}
	h := &Handler{API: srv.URL + "/v1"}
	if err := h.setup(); err != nil {
		t.Fatal(err)
	}
	h.auth = func(k string) (*identity.Caller, bool) {
		if !accepted[k] {
			return nil, false
		}
		if k == roKey {
			return &identity.Caller{Name: "ro", Scopes: []string{"api_keys.list"}}, true
		}
		return &identity.Caller{Name: "admin", Scopes: []string{"*"}}, true
	}
	return h, f, &accepted
}

func serve(h *Handler, method, path string, form url.Values, cookie string, mod ...func(*http.Request)) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
	}
	for _, m := range mod {
		m(r)
	}
	w := httptest.NewRecorder()
	_ = h.ServeHTTP(w, r, nil)
	return w
}

// signIn signs key in and returns the session id and CSRF token.
func signIn(t *testing.T, h *Handler, key string) (string, string) {
	t.Helper()
	w := serve(h, "POST", "/signin", url.Values{"key": {key}}, "")
	if w.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	var id string
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName {
			id = c.Value
		}
	}
	s, ok := h.sessions.get(id)
	if !ok {
		t.Fatal("no session after sign-in")
	}
	return id, s.csrf
}

func TestSession(t *testing.T) {
	h, _, accepted := newConsole(t)
	// Signed out: pages send to sign-in, POSTs are refused.
	if w := serve(h, "GET", "/keys", nil, ""); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin" {
		t.Fatalf("signed out GET: %d %q", w.Code, w.Header().Get("Location"))
	}
	if w := serve(h, "GET", "/keys", nil, "made-up"); w.Code != http.StatusSeeOther {
		t.Fatalf("unknown session: %d", w.Code)
	}
	for _, tc := range []struct {
		name string
		key  string
		want int
	}{{"wrong key", "gw-nope", 401}, {"empty", "", 401}, {"huge", strings.Repeat("k", maxKeyLen+1), 401}, {"right", adminKey, 303}} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(h, "POST", "/signin", url.Values{"key": {tc.key}}, "")
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
			cookies := w.Result().Cookies()
			if tc.want != 303 {
				if len(cookies) != 0 {
					t.Fatal("a refused sign-in set a cookie")
				}
				return
			}
			if len(cookies) != 1 {
				t.Fatalf("cookies: %v", cookies)
			}
			c := cookies[0]
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Value == "" || strings.Contains(c.Value, tc.key) || len(c.Value) < 40 {
				t.Fatalf("cookie %+v", c)
			}
			if strings.Contains(w.Header().Get("Set-Cookie"), tc.key) {
				t.Fatal("the key is in Set-Cookie")
			}
		})
	}
	// Over TLS the cookie is Secure.
	w := serve(h, "POST", "/signin", url.Values{"key": {adminKey}}, "", func(r *http.Request) { r.TLS = &tls.ConnectionState{} })
	if c := w.Result().Cookies(); len(c) != 1 || !c[0].Secure {
		t.Fatalf("TLS cookie: %+v", c)
	}
	id, _ := signIn(t, h, adminKey)
	if w := serve(h, "GET", "/keys", nil, id); w.Code != 200 || strings.Contains(w.Body.String(), adminKey) {
		t.Fatalf("keys page: %d (or the key is in the page)", w.Code)
	}
	// A key the gateway stops accepting (revoked) ends its session.
	delete(*accepted, adminKey)
	if w := serve(h, "GET", "/keys", nil, id); w.Code != http.StatusSeeOther {
		t.Fatalf("revoked key's session: %d", w.Code)
	}
	if _, ok := h.sessions.get(id); ok {
		t.Fatal("the revoked key's session lives on")
	}
	(*accepted)[adminKey] = true
	// Sign-out ends the session.
	id, csrf := signIn(t, h, adminKey)
	if w := serve(h, "POST", "/signout", url.Values{"csrf": {csrf}}, id); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", w.Code)
	}
	if _, ok := h.sessions.get(id); ok {
		t.Fatal("session lives after sign-out")
	}
}

func TestCSRF(t *testing.T) {
	h, f, _ := newConsole(t)
	id, csrf := signIn(t, h, adminKey)
	other, _ := signIn(t, h, adminKey)
	otherCSRF, _ := h.sessions.get(other)
	create := func(tok string) url.Values { return url.Values{"name": {"x"}, "csrf": {tok}} }
	for _, tc := range []struct {
		name string
		form url.Values
		mod  func(*http.Request)
		want int
	}{
		{"no token", url.Values{"name": {"x"}}, nil, 403},
		{"wrong token", create("nope"), nil, 403},
		{"another session's token", create(otherCSRF.csrf), nil, 403},
		{"cross-site", create(csrf), func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403},
		{"right token", create(csrf), func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-origin") }, 303},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.writes()
			mods := []func(*http.Request){}
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			w := serve(h, "POST", "/keys/create", tc.form, id, mods...)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			if called := f.writes() > before; called != (tc.want == 303) {
				t.Fatalf("API write called: %v", called)
			}
		})
	}
	// The created key's secret is shown once.
	w := serve(h, "GET", "/keys", nil, id)
	if !strings.Contains(w.Body.String(), "gw-new-secret-value") {
		t.Fatal("the new secret is not shown")
	}
	if w := serve(h, "GET", "/keys", nil, id); strings.Contains(w.Body.String(), "gw-new-secret-value") {
		t.Fatal("the new secret is shown twice")
	}
}

func TestScopes(t *testing.T) {
	h, f, _ := newConsole(t)
	id, csrf := signIn(t, h, roKey)
	w := serve(h, "GET", "/keys", nil, id)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `id="readonly"`) || strings.Contains(w.Body.String(), `action="/keys/create"`) ||
		strings.Contains(w.Body.String(), `/keys/revoke`) {
		t.Fatalf("read-only keys page: %d", w.Code)
	}
	// Forms shown or not, every write is the API's to refuse: 403.
	for _, tc := range []struct{ path, id string }{{"/keys/create", ""}, {"/keys/rotate", "k1"}, {"/keys/revoke", "k1"},
		{"/budgets/create", ""}, {"/budgets/update", "b1"}, {"/budgets/delete", "b1"},
		{"/ratelimits/create", ""}, {"/ratelimits/update", "r1"}, {"/ratelimits/archive", "r1"}, {"/virtual-keys/create", ""}, {"/virtual-keys/delete", ""}, {"/batches/cancel", "batch_1"}, {"/configs/create", ""}, {"/configs/save", ""}, {"/keys/update", "k1"}} {
		t.Run(tc.path, func(t *testing.T) {
			w := serve(h, "POST", tc.path, url.Values{"csrf": {csrf}, "id": {tc.id}, "slug": {"vk1"}, "name": {"x"}, "credit_limit": {"1"}, "value": {"5"}, "grace_minutes": {"60"}, "provider": {"openai"}, "config": {"{}"}}, id)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "missing_scope") {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
		})
	}
	for _, k := range f.keys {
		if k != roKey {
			t.Fatalf("the API was called with another key")
		}
	}
}

func TestHeadersAndNoInlineCode(t *testing.T) {
	h, _, _ := newConsole(t)
	id, _ := signIn(t, h, adminKey)
	inline := regexp.MustCompile(`<script>|<script [^>]*>[^<]|\sstyle=|\son[a-z]+=|javascript:`)
	for _, path := range []string{"/signin", "/", "/keys", "/virtual-keys", "/budgets", "/batches", "/configs", "/configs?slug=c1", "/keys/edit?id=k1", "/prompts", "/prompts?id=p1", "/logs", "/playground", "/nope", "/static/console.js", "/static/console.css"} {
		t.Run(path, func(t *testing.T) {
			w := serve(h, "GET", path, nil, id)
			got := w.Header().Get("Content-Security-Policy")
			if !strings.Contains(got, "default-src 'self'") || strings.Contains(got, "unsafe") || !strings.Contains(got, "frame-ancestors 'none'") {
				t.Fatalf("CSP %q", got)
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("no nosniff")
			}
			if strings.HasSuffix(w.Header().Get("Content-Type"), "charset=utf-8") && strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
				if m := inline.FindString(w.Body.String()); m != "" {
					t.Fatalf("inline code %q", m)
				}
				if w.Header().Get("Cache-Control") != "no-store" {
					t.Fatal("a page may be cached")
				}
			}
		})
	}
}

func TestHostileInput(t *testing.T) {
	h, _, _ := newConsole(t)
	id, csrf := signIn(t, h, adminKey)
	for _, tc := range []struct {
		name, method, path string
		form               url.Values
		want               int
	}{
		{"huge form", "POST", "/playground", url.Values{"csrf": {csrf}, "message": {strings.Repeat("x", maxForm)}}, 413},
		{"long message", "POST", "/playground", url.Values{"csrf": {csrf}, "model": {"m"}, "message": {strings.Repeat("x", maxMessage+1)}}, 400},
		{"put", "PUT", "/keys", nil, 405},
		{"unknown page", "GET", "/admin", nil, 404},
		{"unknown action", "POST", "/keys/explode", url.Values{"csrf": {csrf}}, 404},
		{"rotate without id", "POST", "/keys/rotate", url.Values{"csrf": {csrf}}, 400},
		{"static traversal", "GET", "/static/../module.go", nil, 404},
		{"logs huge page", "GET", "/logs?page=99999999999&key=" + strings.Repeat("k", 5000), nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := serve(h, tc.method, tc.path, tc.form, id); w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
}

func TestSessionBound(t *testing.T) {
	// Distinct keys: one key holds at most MaxSessionsPerKey sessions.
	s := newSessions()
	for i := 0; i < MaxSessions; i++ {
		if _, _, err := s.create("k"+strconv.Itoa(i), DefaultSessionTTL); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.create("k", DefaultSessionTTL); err != errTooManySessions {
		t.Fatalf("past the bound: %v", err)
	}
	// Expired sessions make room.
	s2 := newSessions()
	for i := 0; i < MaxSessions; i++ {
		_, _, _ = s2.create("k"+strconv.Itoa(i), -1)
	}
	if _, _, err := s2.create("k", DefaultSessionTTL); err != nil {
		t.Fatalf("expired sessions kept their room: %v", err)
	}
}

func TestOverviewAndLogs(t *testing.T) {
	h, _, _ := newConsole(t)
	id, _ := signIn(t, h, adminKey)
	w := serve(h, "GET", "/?range=7d", nil, id)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<rect class="bar"`) || !strings.Contains(w.Body.String(), `id="requests">3<`) {
		t.Fatalf("overview: %d %s", w.Code, w.Body)
	}
	w = serve(h, "GET", "/budgets", nil, id)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<td class="used">1.25</td>`) {
		t.Fatalf("budgets: %d %s", w.Code, w.Body)
	}
	w = serve(h, "GET", "/logs?key=team-a", nil, id)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "tr-1") {
		t.Fatalf("logs: %d", w.Code)
	}
}

func TestPrefix(t *testing.T) {
	for _, tc := range []struct{ orig, cur, want string }{
		{"/console/keys", "/keys", "/console"},
		{"/console/", "/", "/console"},
		{"/a/b/console/logs", "/logs", "/a/b/console"},
		{"/keys", "/keys", ""},
		{"//evil.example/keys", "/keys", "/evil.example"},
		{"/\\evil.example/keys", "/keys", "/evil.example"},
	} {
		t.Run(tc.orig, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://h"+tc.cur, nil)
			orig := httptest.NewRequest("GET", "http://h/", nil)
			orig.URL.Path = tc.orig
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, *orig))
			if got := prefix(r); got != tc.want {
				t.Fatalf("prefix = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConfigEditorRefusesBadJSON(t *testing.T) {
	h, f, _ := newConsole(t)
	id, csrf := signIn(t, h, adminKey)
	for _, cfg := range []string{"", "{", `{"a":` + strings.Repeat("1", maxConfigJSON) + `}`} {
		before := f.writes()
		if w := serve(h, "POST", "/configs/save", url.Values{"csrf": {csrf}, "slug": {"c1"}, "config": {cfg}}, id); w.Code != http.StatusBadRequest {
			t.Fatalf("config %.20q: %d", cfg, w.Code)
		}
		if f.writes() != before {
			t.Fatal("a bad config reached the API")
		}
	}
	if w := serve(h, "POST", "/configs/save", url.Values{"csrf": {csrf}, "slug": {"c1"}, "config": {`{"retry":{"attempts":3}}`}}, id); w.Code != http.StatusSeeOther {
		t.Fatalf("good config: %d", w.Code)
	}
}

func TestKeyEdit(t *testing.T) {
	h, f, _ := newConsole(t)
	id, csrf := signIn(t, h, adminKey)
	w := serve(h, "GET", "/keys/edit?id=k1", nil, id)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `value="gpt-4o*"`) || !strings.Contains(body, `id="credit_limit" name="credit_limit" type="number" min="0" step="any" value="5"`) ||
		!strings.Contains(body, `<option value="weekly" selected>`) {
		t.Fatalf("edit page: %d %s", w.Code, body)
	}
	for _, tc := range []struct {
		credit string
		want   int
	}{{"abc", 400}, {"-1", 400}, {"", 303}, {"7.5", 303}} {
		before := f.writes()
		w := serve(h, "POST", "/keys/update", url.Values{"csrf": {csrf}, "id": {"k1"}, "credit_limit": {tc.credit}, "allowed_models": {"a*, b"}}, id)
		if w.Code != tc.want || (f.writes() > before) != (tc.want == 303) {
			t.Fatalf("credit %q: %d", tc.credit, w.Code)
		}
		if tc.want != 303 {
			continue
		}
		f.mu.Lock()
		last := f.last
		f.mu.Unlock()
		// The metadata the form does not show is kept; the models are a list.
		if !strings.Contains(last, `"metadata":{"team":"a"}`) || !strings.Contains(last, `"allowed_models":["a*","b"]`) {
			t.Fatalf("PUT body %s", last)
		}
		if tc.credit == "" && !strings.Contains(last, `"usage_limits":null`) {
			t.Fatalf("an empty limit does not clear it: %s", last)
		}
	}
}

func TestPromptRender(t *testing.T) {
	h, _, _ := newConsole(t)
	id, csrf := signIn(t, h, adminKey)
	for _, tc := range []struct {
		vars string
		want int
		has  string
	}{{`{"n":"Ada"}`, 200, "Hi Ada"}, {`[1]`, 400, "JSON object"}, {`{`, 400, "JSON object"}} {
		w := serve(h, "POST", "/prompts?id=p1", url.Values{"csrf": {csrf}, "variables": {tc.vars}, "version": {"1"}}, id)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.has) {
			t.Fatalf("variables %s: %d", tc.vars, w.Code)
		}
	}
}

// TestKeySearchAndGrace: the keys page passes its search and status to
// the API and keeps them in the next page's link; a rotation sends the
// grace chosen, and one beyond the API's bound is refused here.
func TestKeySearchAndGrace(t *testing.T) {
	h, f, _ := newConsole(t)
	id, csrf := signIn(t, h, adminKey)
	w := serve(h, "GET", "/keys?search="+url.QueryEscape("Team A")+"&status=active", nil, id)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `value="Team A"`) || !strings.Contains(w.Body.String(), "keys match") {
		t.Fatalf("searched keys page: %d", w.Code)
	}
	q := f.lastQuery("GET /v1/api-keys")
	if q.Get("search") != "Team A" || q.Get("status") != "active" {
		t.Fatalf("the API was asked %v", q)
	}
	long := serve(h, "GET", "/keys?search="+strings.Repeat("x", 300), nil, id)
	q = f.lastQuery("GET /v1/api-keys")
	if long.Code != 200 || len(q.Get("search")) != maxKeySearch {
		t.Fatalf("a long search: %d, sent %d bytes", long.Code, len(q.Get("search")))
	}
	for _, tc := range []struct {
		grace string
		code  int
		ms    string
	}{{"1440", 303, `"key_transition_period_ms":86400000`}, {"0", 303, `"key_transition_period_ms":0`},
		{"", 303, `"key_transition_period_ms":3600000`}, {"43201", 400, ""}, {"-1", 400, ""}, {"1e3", 400, ""}, {" 5", 400, ""}} {
		t.Run("grace "+tc.grace, func(t *testing.T) {
			before := f.writes()
			w := serve(h, "POST", "/keys/rotate", url.Values{"csrf": {csrf}, "id": {"k1"}, "grace_minutes": {tc.grace}}, id)
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d", w.Code, tc.code)
			}
			f.mu.Lock()
			last := f.last
			f.mu.Unlock()
			if tc.code == 303 && !strings.Contains(last, tc.ms) {
				t.Fatalf("sent %s", last)
			}
			if tc.code != 303 && f.writes() != before {
				t.Fatal("a refused grace reached the API")
			}
		})
	}
}

// TestRateLimitsOnBudgets: the budgets page lists the rate-limit
// policies; a key without the write scopes sees no form, the admin's
// edit sends only the new value.
func TestRateLimitsOnBudgets(t *testing.T) {
	h, f, _ := newConsole(t)
	ro, _ := signIn(t, h, roKey)
	w := serve(h, "GET", "/budgets", nil, ro)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `data-rate="per-key"`) {
		t.Fatalf("read-only budgets page: %d", w.Code)
	}
	for _, form := range []string{"/ratelimits/create", "/ratelimits/update", "/ratelimits/archive", "/budgets/create", "/budgets/update", "/budgets/delete"} {
		if strings.Contains(body, form) {
			t.Fatalf("a read-only key is shown %s", form)
		}
	}
	admin, csrf := signIn(t, h, adminKey)
	body = serve(h, "GET", "/budgets", nil, admin).Body.String()
	for _, form := range []string{"/ratelimits/create", "/ratelimits/update", "/ratelimits/archive"} {
		if !strings.Contains(body, form) {
			t.Fatalf("the admin is not shown %s", form)
		}
	}
	if w := serve(h, "POST", "/ratelimits/update", url.Values{"csrf": {csrf}, "id": {"r1"}, "value": {"120"}}, admin); w.Code != 303 {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	f.mu.Lock()
	last, call := f.last, f.calls[len(f.calls)-1]
	f.mu.Unlock()
	if call != "PUT /v1/policies/rate-limits/r1" || last != `{"value":120}`+"\n" && last != `{"value":120}` {
		t.Fatalf("%s %q", call, last)
	}
	if w := serve(h, "POST", "/ratelimits/create", url.Values{"csrf": {csrf}, "value": {"many"}}, admin); w.Code != 400 {
		t.Fatalf("a non-numeric limit: %d", w.Code)
	}
}
