package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// scriptedAPI answers each "METHOD /v1/path" it is given, 404 otherwise,
// and records every call with its body.
type scriptedAPI struct {
	mu      sync.Mutex
	answers map[string]scripted
	calls   []string
	bodies  map[string]string
}

type scripted struct {
	status int
	body   string
}

func (s *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	call := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.bodies[call] = string(b)
	a, ok := s.answers[call]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		a = scripted{404, `{"error":{"message":"no such thing"}}`}
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// body is what the console sent with call ("" when it did not call).
func (s *scriptedAPI) body(call string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bodies[call]
	return b, ok
}

// scriptedConsole is a console over a scriptedAPI answering answers,
// signed in with a key of every scope; it returns the session and its
// CSRF token.
func scriptedConsole(t *testing.T, answers map[string]scripted) (*Handler, *scriptedAPI, string, string) {
	t.Helper()
	api := &scriptedAPI{answers: answers, bodies: map[string]string{}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	h := &Handler{API: srv.URL + "/v1"}
	if err := h.setup(); err != nil {
		t.Fatal(err)
	}
	h.auth = func(k string) (*identity.Caller, bool) {
		return &identity.Caller{Name: "admin", Scopes: []string{"*"}}, k == adminKey
	}
	id, csrf := signIn(t, h, adminKey)
	return h, api, id, csrf
}

const refusal = `{"error":{"message":"unknown scope \"completions.wirte\"","type":"invalid_request_error","code":null}}`

// pageAnswers are the reads every page of the tests makes.
var pageAnswers = map[string]scripted{
	"GET /v1/api-keys":                    {200, `{"object":"list","total":0,"data":[]}`},
	"GET /v1/api-keys/k1":                 {200, `{"id":"k1","name":"team-a","status":"active","scopes":["completions.write"]}`},
	"GET /v1/virtual-keys":                {200, `{"object":"list","total":0,"data":[]}`},
	"GET /v1/policies/usage-limits":       {200, `{"object":"list","total":0,"data":[]}`},
	"GET /v1/policies/rate-limits":        {200, `{"object":"list","data":[]}`},
	"GET /v1/policies/usage-limits/b1":    {200, `{"id":"b1","name":"team","type":"cost","credit_limit":5}`},
	"GET /v1/usage/me":                    {200, `{"usage_limits":[]}`},
	"GET /v1/policies/usage-limits/usage": {200, `{"object":"list","total":0,"data":[]}`},
	"GET /v1/configs":                     {200, `{"object":"list","total":0,"data":[]}`},
	"GET /v1/configs/c1":                  {200, `{"slug":"c1","name":"c","source":"api","config":{"a":2}}`},
	"GET /v1/configs/c1/versions":         {200, `{"object":"list","data":[{"version_id":"v1","config":{"a":1,"keep":true}},{"version_id":"v2","config":{"a":2,"keep":true}}]}`},
	"GET /v1/prompts":                     {200, `{"object":"list","total":0,"data":[]}`},
	"GET /v1/prompts/p1":                  {200, `{"id":"p1","slug":"greet","name":"greet","source":"api"}`},
	"GET /v1/prompts/p1/versions":         {200, `{"object":"list","data":[{"prompt_version":1,"prompt_template":"[{\"role\":\"user\",\"content\":\"Hi\"}]","published":true},{"prompt_version":2,"prompt_template":"[{\"role\":\"user\",\"content\":\"Hey\"}]"}]}`},
}

func with(extra map[string]scripted) map[string]scripted {
	out := make(map[string]scripted, len(pageAnswers)+len(extra))
	for k, v := range pageAnswers {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// TestRefusedFormKeepsWhatWasTyped: a form the API (or the console)
// refuses shows its page again, with the status, the message beside the
// form and the values typed filled in, never a secret typed.
func TestRefusedFormKeepsWhatWasTyped(t *testing.T) {
	for _, tc := range []struct {
		name, path, write string
		form              url.Values
		// want are fragments of the page; lacks must not be in it.
		want  []string
		lacks string
	}{
		{name: "key create with a scope typo", path: "/keys/create", write: "POST /v1/api-keys/organisation/service",
			form: url.Values{"name": {"ci-bot"}, "scopes": {"completions.wirte"}, "type": {"organisation"}},
			want: []string{`id="create"`, `value="ci-bot"`, `value="completions.wirte"`, `<option value="organisation" selected>`}},
		{name: "key edit", path: "/keys/update", write: "PUT /v1/api-keys/k1",
			form: url.Values{"id": {"k1"}, "description": {"night jobs"}, "allowed_models": {"gpt-4o, o3"}, "credit_limit": {"7"}, "periodic_reset": {"weekly"}},
			want: []string{`id="edit-key"`, `value="night jobs"`, `value="gpt-4o, o3"`, `value="7"`, `<option value="weekly" selected>`}},
		{name: "virtual key create, the provider key not sent back", path: "/virtual-keys/create", write: "POST /v1/virtual-keys",
			form: url.Values{"name": {"openai-prod"}, "provider": {"opnai"}, "key": {"sk-very-secret-provider-key"}},
			want: []string{`id="create-vk"`, `value="openai-prod"`, `value="opnai"`}, lacks: "sk-very-secret-provider-key"},
		{name: "budget create", path: "/budgets/create", write: "POST /v1/policies/usage-limits",
			form: url.Values{"name": {"team cap"}, "type": {"tokens"}, "credit_limit": {"1000"}, "periodic_reset": {"weekly"}, "api_key": {"team-a"}},
			want: []string{`id="create-budget"`, `value="team cap"`, `value="1000"`, `value="team-a"`, `<option value="tokens" selected>`}},
		{name: "rate limit create", path: "/ratelimits/create", write: "POST /v1/policies/rate-limits",
			form: url.Values{"name": {"slow"}, "type": {"tokens"}, "value": {"50"}, "unit": {"rph"}, "api_key": {"team-b"}},
			want: []string{`id="create-rate"`, `value="slow"`, `value="50"`, `value="team-b"`, `<option value="rph" selected>`}},
		{name: "config create", path: "/configs/create", write: "POST /v1/configs",
			form: url.Values{"name": {"fallbacks"}, "config": {`{"strategy":{"mode":"nonsense"}}`}},
			want: []string{`id="create-config"`, `value="fallbacks"`, `{&#34;strategy&#34;:{&#34;mode&#34;:&#34;nonsense&#34;}}`}},
		{name: "config save", path: "/configs/save", write: "PUT /v1/configs/c1",
			form: url.Values{"slug": {"c1"}, "config": {`{"strategy":{"mode":"nonsense"}}`}},
			want: []string{`id="edit-config"`, `{&#34;strategy&#34;:{&#34;mode&#34;:&#34;nonsense&#34;}}`}},
		{name: "prompt create", path: "/prompts/create", write: "POST /v1/prompts",
			form: url.Values{"name": {"welcome"}, "model": {"gpt-4o-mini"}, "template": {`[{"role":"user","contents":"x"}]`}},
			want: []string{`id="create-prompt"`, `value="welcome"`, `value="gpt-4o-mini"`, `&#34;contents&#34;`}},
		{name: "prompt new version", path: "/prompts/update", write: "PUT /v1/prompts/p1",
			form: url.Values{"id": {"p1"}, "model": {"o3"}, "description": {"shorter"}, "template": {`[{"role":"user","contents":"x"}]`}},
			want: []string{`id="edit-prompt"`, `value="o3"`, `value="shorter"`, `&#34;contents&#34;`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, api, id, csrf := scriptedConsole(t, with(map[string]scripted{tc.write: {400, refusal}}))
			tc.form.Set("csrf", csrf)
			w := serve(h, "POST", tc.path, tc.form, id)
			body := w.Body.String()
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want the API's 400: %s", w.Code, body)
			}
			if _, called := api.body(tc.write); !called {
				t.Fatalf("the API was not called (%s)", tc.write)
			}
			// The message beside the form, the page's own title (not the
			// error page's).
			if !strings.Contains(body, `class="error form-error" id="error" role="alert">`) || !strings.Contains(body, "completions.wirte") {
				t.Fatalf("no message beside the form: %s", body)
			}
			if strings.Contains(body, "<title>Bad Request") {
				t.Fatal("the dead-end error page")
			}
			for _, s := range tc.want {
				if !strings.Contains(body, s) {
					t.Errorf("the page lacks %s", s)
				}
			}
			if tc.lacks != "" && strings.Contains(body, tc.lacks) {
				t.Errorf("the page shows %q", tc.lacks)
			}
		})
	}
}

// TestConsoleRefusalKeepsTheForm: what the console itself refuses (not
// JSON, not a number) also keeps the form, without calling the API.
func TestConsoleRefusalKeepsTheForm(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		form       url.Values
		want       string
	}{
		{"config not JSON", "/configs/create", url.Values{"name": {"x1"}, "config": {"{retry"}}, "{retry"},
		{"budget limit not a number", "/budgets/create", url.Values{"name": {"x2"}, "credit_limit": {"ten"}}, `value="ten"`},
		{"prompt template not JSON", "/prompts/create", url.Values{"name": {"x3"}, "template": {"[{"}}, "[{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, api, id, csrf := scriptedConsole(t, pageAnswers)
			tc.form.Set("csrf", csrf)
			w := serve(h, "POST", tc.path, tc.form, id)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) || !strings.Contains(w.Body.String(), `id="error"`) {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			for _, c := range api.calls {
				if !strings.HasPrefix(c, "GET ") {
					t.Fatalf("the API was written to: %s", c)
				}
			}
		})
	}
}

// TestConfigRollback: a rollback saves the old version's config as a new
// version through PUT /v1/configs/{slug}, the API's own save; an unknown
// version writes nothing.
func TestConfigRollback(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		status        int
		put           string
	}{
		{"to version 1", "v1", http.StatusSeeOther, `{"config":{"a":1,"keep":true}}`},
		{"to no such version", "v9", http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, api, id, csrf := scriptedConsole(t, with(map[string]scripted{"PUT /v1/configs/c1": {200, `{"version_id":"v3"}`}}))
			w := serve(h, "POST", "/configs/rollback", url.Values{"csrf": {csrf}, "slug": {"c1"}, "version": {tc.version}}, id)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			got, called := api.body("PUT /v1/configs/c1")
			if tc.put == "" {
				if called {
					t.Fatalf("a PUT for an unknown version: %s", got)
				}
				return
			}
			var a, b any
			_ = json.Unmarshal([]byte(got), &a)
			_ = json.Unmarshal([]byte(tc.put), &b)
			if ja, _ := json.Marshal(a); string(ja) != mustJSON(b) {
				t.Fatalf("PUT body %s, want %s", got, tc.put)
			}
			if loc := w.Header().Get("Location"); loc != "/configs?slug=c1" {
				t.Fatalf("back to %q", loc)
			}
		})
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestConfigDiffPage: the page compares the two latest versions by
// default, or the two asked for, as an escaped line diff.
func TestConfigDiffPage(t *testing.T) {
	answers := with(map[string]scripted{"GET /v1/configs/c1/versions": {200, `{"object":"list","data":[` +
		`{"version_id":"v1","config":{"a":1,"note":"</pre><script>x</script>"}},{"version_id":"v2","config":{"a":2,"note":"</pre><script>x</script>"}},{"version_id":"v3","config":{"a":2,"note":"</pre><script>x</script>"}}]}`}})
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"default: the two latest, equal", "", []string{"version 2 → version 3: the same config", `<span class="same">    &#34;a&#34;: 2,</span>`}},
		{"two chosen", "&from=v1&to=v3", []string{"version 1 → version 3</p>", `<span class="del">-   &#34;a&#34;: 1,</span>`, `<span class="add">&#43;   &#34;a&#34;: 2,</span>`,
			`<option value="v1" selected>version 1</option>`, `&lt;/pre&gt;&lt;script&gt;`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, id, _ := scriptedConsole(t, answers)
			w := serve(h, "GET", "/configs?slug=c1"+tc.query, nil, id)
			body := w.Body.String()
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, body)
			}
			for _, s := range tc.want {
				if !strings.Contains(body, s) {
					t.Errorf("the page lacks %s", s)
				}
			}
			if strings.Contains(body, "<script>x") {
				t.Error("the config is not escaped")
			}
			// Every version but the current one may be rolled back to.
			if n := strings.Count(body, `class="rotate rollback"`); n != 2 {
				t.Errorf("%d rollback buttons, want 2", n)
			}
		})
	}
}

// TestPromptActions: the prompts page writes through the prompts API's
// own calls: create, a new version (PUT), publish (makeDefault).
func TestPromptActions(t *testing.T) {
	for _, tc := range []struct {
		name, path, call string
		form             url.Values
		body             string
		back             string
	}{
		{"create", "/prompts/create", "POST /v1/prompts", url.Values{"name": {"welcome"}, "model": {"gpt-4o-mini"}, "template": {`[{"role":"user","content":"Hi {{n}}"}]`}},
			`{"model":"gpt-4o-mini","name":"welcome","string":"[{\"role\":\"user\",\"content\":\"Hi {{n}}\"}]","version_description":""}`, "/prompts?id=p9"},
		{"new version", "/prompts/update", "PUT /v1/prompts/p1", url.Values{"id": {"p1"}, "description": {"warmer"}, "template": {`[{"role":"user","content":"Hello"}]`}},
			`{"string":"[{\"role\":\"user\",\"content\":\"Hello\"}]","version_description":"warmer"}`, "/prompts?id=p1"},
		{"publish", "/prompts/publish", "PUT /v1/prompts/p1/makeDefault", url.Values{"id": {"p1"}, "version": {"2"}}, `{"version":2}`, "/prompts?id=p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, api, id, csrf := scriptedConsole(t, with(map[string]scripted{tc.call: {200, `{"id":"p9"}`}}))
			tc.form.Set("csrf", csrf)
			w := serve(h, "POST", tc.path, tc.form, id)
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tc.back {
				t.Fatalf("status %d to %q: %s", w.Code, w.Header().Get("Location"), w.Body)
			}
			if got, _ := api.body(tc.call); got != tc.body {
				t.Fatalf("%s body %s, want %s", tc.call, got, tc.body)
			}
		})
	}
	// The page offers publishing the unpublished version only.
	h, _, id, _ := scriptedConsole(t, pageAnswers)
	body := serve(h, "GET", "/prompts?id=p1", nil, id).Body.String()
	if n := strings.Count(body, `class="rotate publish"`); n != 1 || !strings.Contains(body, `name="version" value="2"`) {
		t.Fatalf("%d publish buttons: %s", n, body)
	}
	if !strings.Contains(body, "&#34;Hey&#34;") {
		t.Fatal("the editor does not start from the latest version")
	}
}

func TestLineDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       string
	}{
		{"equal", "a\nb", "a\nb", " a| b"},
		{"changed middle", "a\nb\nc", "a\nx\nc", " a|-b|+x| c"},
		{"added end", "a", "a\nb", " a|+b"},
		{"removed start", "a\nb", "b", "-a| b"},
		{"interleaved", "a\nb\nc\nd", "b\nx\nd\ny", "-a| b|-c|+x| d|+y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var parts []string
			for _, l := range lineDiff(tc.a, tc.b) {
				parts = append(parts, l.Sign()+l.Text)
			}
			if got := strings.Join(parts, "|"); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	// Past the table's bound the middle is all removed then all added.
	a, b := strings.Repeat("a\n", 1100), strings.Repeat("b\n", 1100)
	d := lineDiff(a, b)
	if len(d) != 2201 || d[0].Op != '-' || d[1099].Op != '-' || d[1100].Op != '+' {
		t.Fatalf("a large diff: %d lines", len(d))
	}
}

// TestKeptValuesDropSecrets: what a refused form keeps never holds a
// provider key or the CSRF token, whatever template shows it.
func TestKeptValuesDropSecrets(t *testing.T) {
	r := httptest.NewRequest("POST", "/virtual-keys/create", nil)
	r.PostForm = url.Values{"name": {"n"}, "key": {"sk-secret"}, "csrf": {"tok"}}
	got := keptValues(r)
	if got.Get("name") != "n" || got.Has("key") || got.Has("csrf") {
		t.Fatalf("kept %v", got)
	}
}
