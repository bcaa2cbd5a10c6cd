package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth/jwttest"
)

// The console signs in through the llm app's oidc block: the keys site
// with the console (consoleSiteWith), its IdP the jwttest issuer. Group
// "admins" makes a user an organisation member holding every scope,
// "users" a member of keysWorkspace who may call models.

// consoleOIDCSite loads the console site with is as its identity
// provider, upstream the fake provider.
func consoleOIDCSite(t *testing.T, is *jwttest.Issuer, upstream string) {
	t.Helper()
	consoleSiteWith(t, upstream, filepath.Join(t.TempDir(), "ledger.db"), fmt.Sprintf(`oidc {
			issuer %s
			audience %s
			client_id %s
			client_secret %s
			egress_allow loopback
			workspace_id %s
			organisation_id %s
			group admins {
				type organisation
				scopes *
			}
			group users {
				scopes completions.write logs.view analytics.view
			}
		}`, is.URL, is.Audience, is.ClientID, is.ClientSecret, keysWorkspace, keysOrg))
}

// oidcStart begins a sign-in with c and returns the IdP authorization
// URL the console redirected to.
func oidcStart(t *testing.T, c *consoleClient) string {
	t.Helper()
	resp := c.raw("GET", consoleURL()+"/oidc/login", "")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("oidc/login: %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// raw sends one GET with c's cookies (plus cookie, when given) and
// returns the answer, its body read into Body's place.
func (c *consoleClient) raw(method, u, cookie string) *rawAnswer {
	c.t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &rawAnswer{Response: resp, body: string(b)}
}

type rawAnswer struct {
	*http.Response
	body string
}

// TestConsoleOIDCSignIn: the authorization code flow at the HTTP level:
// the console's authorization request carries a state, a nonce and an
// S256 PKCE challenge; the callback starts a session (HttpOnly,
// SameSite=Strict cookie) whose user is the IdP's, placed by its group;
// and each broken sign-in is refused with the sign-in page: a replayed
// state, a callback in a browser that did not start it, an ID token with
// another nonce, a code of another sign-in (its PKCE verifier is not
// this one's), a user in no group. Sign-out ends the session.
func TestConsoleOIDCSignIn(t *testing.T) {
	is := newIdP(t)
	up := newFakeOpenAI(t)
	consoleOIDCSite(t, is, up.URL)
	is.SetUser("alice", map[string]any{"groups": []string{"admins"}, "email": "alice@example.com"})
	is.SetUser("bob", map[string]any{"groups": []string{"users"}})
	is.SetUser("eve", map[string]any{"groups": []string{"alumni"}})

	c := newConsoleClient(t)
	if code, body := c.send("GET", "/signin", nil); code != 200 || !strings.Contains(body, `id="oidc-signin"`) {
		t.Fatalf("the sign-in page offers no IdP sign-in: %d", code)
	}
	auth := oidcStart(t, c)
	au, _ := url.Parse(auth)
	q := au.Query()
	if !strings.HasPrefix(auth, is.URL+"/authorize?") || q.Get("state") == "" || q.Get("nonce") == "" ||
		q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || q.Get("client_id") != is.ClientID {
		t.Fatalf("authorization request %s: want state, nonce and an S256 challenge for client %s", auth, is.ClientID)
	}
	if strings.Contains(auth, "code_verifier") {
		t.Fatal("the PKCE verifier left the server")
	}
	back, err := is.Approve(auth, "alice")
	if err != nil {
		t.Fatal(err)
	}
	done := c.raw("GET", back, "")
	if done.StatusCode != 200 || !strings.Contains(done.body, `id="signedin"`) || !strings.Contains(done.body, `http-equiv="refresh"`) {
		t.Fatalf("callback: %d %s", done.StatusCode, done.body)
	}
	var session *http.Cookie
	for _, ck := range done.Cookies() {
		if ck.Name == "llm_console_session" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict", session)
	}
	if code, body := c.send("GET", "/keys", nil); code != 200 || !strings.Contains(body, `class="who">user:alice<`) || c.csrf == "" {
		t.Fatalf("keys page as alice: %d (who user:alice, a CSRF token)", code)
	}

	refused := func(name string, a *rawAnswer, status int, says string) {
		t.Helper()
		if a.StatusCode != status || !strings.Contains(a.body, says) || !strings.Contains(a.body, `id="signin"`) {
			t.Errorf("%s: %d, want %d with the sign-in page saying %q: %s", name, a.StatusCode, status, says, a.body)
		}
		for _, ck := range a.Cookies() {
			if ck.Name == "llm_console_session" && ck.MaxAge >= 0 {
				t.Errorf("%s: a session cookie was set", name)
			}
		}
	}
	// The same callback again, with the state cookie it had.
	refused("replayed state", newConsoleClient(t).raw("GET", back, "llm_console_oidc_state="+q.Get("state")),
		http.StatusBadRequest, "expired or was already used")

	// A callback in a browser that did not begin the sign-in.
	c2 := newConsoleClient(t)
	back2, _ := is.Approve(oidcStart(t, c2), "bob")
	refused("another browser", newConsoleClient(t).raw("GET", back2, ""), http.StatusBadRequest, "not started in this browser")

	// An ID token whose nonce is not the sign-in's.
	c3 := newConsoleClient(t)
	is.SetNonce("another-sign-in")
	back3, _ := is.Approve(oidcStart(t, c3), "bob")
	refused("wrong nonce", c3.raw("GET", back3, ""), http.StatusUnauthorized, "nonce")
	is.SetNonce("")

	// A code of another sign-in (stolen, injected into this one): the
	// verifier sent is this sign-in's, which the code's challenge was
	// not made from, so the IdP refuses the exchange.
	victim := newConsoleClient(t)
	stolen, _ := url.Parse(mustApprove(t, is, oidcStart(t, victim), "bob"))
	attacker := newConsoleClient(t)
	own, _ := url.Parse(mustApprove(t, is, oidcStart(t, attacker), "bob"))
	injected := *own
	v := own.Query()
	v.Set("code", stolen.Query().Get("code"))
	injected.RawQuery = v.Encode()
	refused("code of another sign-in (wrong verifier)", attacker.raw("GET", injected.String(), ""), http.StatusUnauthorized, "refused the sign-in")

	// A user in none of the configured groups.
	c4 := newConsoleClient(t)
	refused("no group", c4.raw("GET", mustApprove(t, is, oidcStart(t, c4), "eve"), ""), http.StatusUnauthorized, "in no group")

	// Bob, of group users, signs in as a workspace member with its scopes.
	c5 := newConsoleClient(t)
	if a := c5.raw("GET", mustApprove(t, is, oidcStart(t, c5), "bob"), ""); a.StatusCode != 200 {
		t.Fatalf("bob's sign-in: %d %s", a.StatusCode, a.body)
	}
	if code, body := c5.send("GET", "/", nil); code != 200 || !strings.Contains(body, `class="who">user:bob<`) {
		t.Fatalf("overview as bob: %d %s", code, body)
	}

	// Sign-out ends alice's session.
	if code, _ := c.send("POST", "/signout", url.Values{"csrf": {c.csrf}}); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	if code, _ := c.send("GET", "/keys", nil); code != http.StatusSeeOther {
		t.Fatalf("keys page after sign-out: %d, want the redirect to sign in", code)
	}
}

func mustApprove(t *testing.T, is *jwttest.Issuer, auth, sub string) string {
	t.Helper()
	back, err := is.Approve(auth, sub)
	if err != nil {
		t.Fatalf("the IdP's sign-in of %s: %v", sub, err)
	}
	return back
}

// TestConsoleOIDCInBrowser: in headless Chromium, the sign-in page's
// "Sign in with your identity provider" leads to the IdP's login page;
// signing in there lands on the console's overview as the IdP's user,
// with no console error or CSP violation on the way.
func TestConsoleOIDCInBrowser(t *testing.T) {
	b := newBrowser(t)
	is := newIdP(t)
	up := newFakeOpenAI(t)
	consoleOIDCSite(t, is, up.URL)
	is.SetUser("alice", map[string]any{"groups": []string{"admins"}})
	is.SetLogin("alice")
	base := consoleURL()
	b.run(t, "sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#oidc-signin")))
	b.clean(t, "sign-in page")
	b.run(t, "to the IdP", chromedp.Click(chromedp.CSS("#oidc-signin")), chromedp.WaitVisible(chromedp.CSS("#idp-login")))
	if got := b.value(t, "#username"); got != "alice" {
		t.Fatalf("the IdP's login page: user %q", got)
	}
	b.run(t, "signing in at the IdP", chromedp.Click(chromedp.CSS("#idp-submit")), chromedp.WaitVisible(chromedp.CSS("#requests")))
	if got := b.text(t, ".who"); got != "user:alice" {
		t.Fatalf("signed in as %q, want user:alice", got)
	}
	b.clean(t, "overview after the IdP sign-in")
	b.run(t, "keys page", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	b.clean(t, "keys page")
}
