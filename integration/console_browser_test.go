package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium. Missing, the browser tests skip,
// except in CI (REQUIRE_REDIS=1), where .ci/run installs it and they
// must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("REQUIRE_REDIS") == "1" {
		t.Fatal("chromium is missing and REQUIRE_REDIS=1: install it (apt-get install -y chromium) or set CHROMIUM")
	}
	t.Skip("skipping the browser test: chromium is missing (apt-get install -y chromium, or set CHROMIUM); REQUIRE_REDIS=1 makes this a failure")
	return ""
}

// browser is a headless Chromium tab that records every console error,
// uncaught exception and log entry of level error (CSP violations are
// reported there) for the test to check.
type browser struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 860))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				b.record("console." + string(ev.Type))
			}
		case *runtime.EventExceptionThrown:
			b.record("exception: " + ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				b.record(string(ev.Entry.Source) + ": " + ev.Entry.Text)
			}
		}
	}))
	// A bound on the whole browser session, so a stuck page fails the
	// test instead of hanging it (not a timing assertion).
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	b.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enabling the log domain: %v", err)
	}
	// The revoke button asks to confirm: accept.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

func (b *browser) record(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// forget drops the reports that contain s (an expected one).
func (b *browser) forget(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.errs[:0]
	for _, e := range b.errs {
		if !strings.Contains(e, s) {
			kept = append(kept, e)
		}
	}
	b.errs = kept
}

// clean fails the test if the browser reported an error or a CSP
// violation since the last call.
func (b *browser) clean(t *testing.T, where string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) > 0 {
		t.Errorf("%s: the browser reported: %s", where, strings.Join(b.errs, "; "))
	}
	b.errs = nil
}

func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a screenshot of the page as docs/console/<name>.png when
// CONSOLE_SCREENSHOTS=1 (the docs' pictures come from this test).
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	if os.Getenv("CONSOLE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// text reads the text of the element sel.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// value reads the value of the form field sel.
func (b *browser) value(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// has reports whether sel is on the page now.
func (b *browser) has(t *testing.T, sel string) bool {
	t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](fmt.Sprintf("document.querySelector(%q) !== null", sel)))
	if err != nil {
		t.Fatalf("looking for %s: %v", sel, err)
	}
	return n
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// real Caddy: sign in, see the overview of requests sent through the
// gateway, create a key and see its secret once, rotate it, revoke it and
// see the next request with it refused, open that key's logs, run the
// playground, and find no console error or CSP violation on any page.
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	up := newFakeOpenAI(t)
	consoleSiteLimited(t, up.URL)
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	var traces []string
	for i := 0; i < 3; i++ {
		resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", keysAdminKey, "x-gateway-virtual-key", "fake")
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %d", resp.StatusCode)
		}
		traces = append(traces, resp.Header.Get("X-Gateway-Trace-Id"))
	}
	syncLedger(t)
	base := consoleURL()

	b.run(t, "sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin")))
	b.shot(t, "signin")
	b.clean(t, "sign-in page")
	b.run(t, "signing in", chromedp.SendKeys(chromedp.CSS("#key"), keysAdminKey), chromedp.Submit(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#requests")))
	if got := b.text(t, "#requests"); got != "3" {
		t.Fatalf("overview requests = %q, want 3", got)
	}
	b.shot(t, "overview")
	b.clean(t, "overview")

	// Create a key: its secret shows once.
	b.run(t, "keys page", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#create")),
		chromedp.SendKeys(chromedp.CSS("#name"), "browser-key"), chromedp.Submit(chromedp.CSS("#create")),
		chromedp.WaitVisible(chromedp.CSS("#secret-value")))
	secret := b.text(t, "#secret-value")
	if !strings.HasPrefix(secret, "gw-") {
		t.Fatalf("secret %q", secret)
	}
	b.shot(t, "keys")
	b.clean(t, "keys page with a new key")
	b.run(t, "keys page again", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if b.has(t, "#secret-value") {
		t.Fatal("the secret is shown a second time")
	}
	if resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", secret, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
		t.Fatalf("chat with the new key: %d", resp.StatusCode)
	}

	// Search: the server finds it by part of its name, any case, and by
	// its id's prefix; a search for what no key has shows none.
	row := `tr[data-key="browser-key"]`
	b.run(t, "searching keys", chromedp.SendKeys(chromedp.CSS("#search-text"), "BROWSER-k"), chromedp.Submit(chromedp.CSS("#search")),
		chromedp.WaitVisible(chromedp.CSS("#clear")), chromedp.WaitVisible(chromedp.CSS(row)))
	// The count's sentence goes on to say over what the use is summed.
	if got := b.text(t, "p.count"); !strings.HasPrefix(got, "1 keys match") {
		t.Fatalf("a name search: %q", got)
	}
	href, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf("document.querySelector(%q).getAttribute('href')", row+" a.edit")))
	if err != nil || !strings.Contains(href, "id=") {
		t.Fatalf("the key's edit link %q: %v", href, err)
	}
	keyID := href[strings.Index(href, "id=")+3:]
	b.run(t, "searching by id", chromedp.Navigate(base+"/keys?search="+keyID[:20]), chromedp.WaitVisible(chromedp.CSS(row)))
	b.run(t, "searching for nothing", chromedp.SetValue(chromedp.CSS("#search-text"), "no-such-key"), chromedp.Submit(chromedp.CSS("#search")),
		chromedp.WaitNotPresent(chromedp.CSS(row)), chromedp.WaitVisible(chromedp.CSS("#clear")))
	if got := b.text(t, "p.count"); !strings.HasPrefix(got, "0 keys match") || b.has(t, row) {
		t.Fatalf("a search without a match: %q", got)
	}
	b.clean(t, "key search")

	// Edit: narrow its models and give it a spending limit.
	b.run(t, "editing the key", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS(row)), chromedp.Click(chromedp.CSS(row+" a.edit")), chromedp.WaitVisible(chromedp.CSS("#edit-key")),
		chromedp.SetValue(chromedp.CSS("#allowed_models"), "gpt-4o*"), chromedp.SetValue(chromedp.CSS("#credit_limit"), "5"),
		chromedp.Submit(chromedp.CSS("#edit-key")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if got := b.value(t, "#allowed_models"); got != "gpt-4o*" {
		t.Fatalf("allowed models after saving %q", got)
	}
	if got := b.value(t, "#credit_limit"); got != "5" {
		t.Fatalf("spending limit after saving %q", got)
	}
	b.shot(t, "key-edit")
	b.clean(t, "key edit")
	other := []byte(`{"model":"gpt-3.5-turbo","messages":[{"role":"user","content":"hi"}]}`)
	if resp, _ := do(t, "POST", "/chat/completions", other, "x-gateway-api-key", secret, "x-gateway-virtual-key", "fake"); resp.StatusCode == 200 {
		t.Fatal("a model the key may no longer use answered 200")
	}
	if resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", secret, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
		t.Fatalf("an allowed model: %d", resp.StatusCode)
	}

	// Rotate with no grace: a new secret, shown once, and the old one
	// refused at once (the default grace, an hour, would keep it).
	b.run(t, "back to the keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	b.run(t, "rotating", chromedp.SetValue(chromedp.CSS(row+" input.grace"), "0"), chromedp.Click(chromedp.CSS(row+" button.rotate")),
		chromedp.WaitVisible(chromedp.CSS("#secret-value")))
	rotated := b.text(t, "#secret-value")
	if rotated == secret || !strings.HasPrefix(rotated, "gw-") {
		t.Fatalf("rotated secret %q", rotated)
	}
	b.clean(t, "rotation")
	if resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", secret, "x-gateway-virtual-key", "fake"); resp.StatusCode != 401 {
		t.Fatalf("the old key after a rotation without grace: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", rotated, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
		t.Fatalf("the rotated key: %d", resp.StatusCode)
	}
	// A grace beyond the API's bound (30 days) is refused.
	b.run(t, "back to the keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	b.run(t, "rotating too long", chromedp.SetAttributeValue(chromedp.CSS(row+" input.grace"), "max", "99999"),
		chromedp.SetValue(chromedp.CSS(row+" input.grace"), "43201"), chromedp.Click(chromedp.CSS(row+" button.rotate")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := b.text(t, "#error"); !strings.Contains(got, "43200") {
		t.Fatalf("a grace of 43201 minutes: %q", got)
	}
	b.forget("the server responded with a status of 400")
	b.clean(t, "a refused grace")
	b.run(t, "back to the keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS(row)))

	// Revoke (the page asks to confirm): the next request is refused.
	b.run(t, "revoking", chromedp.Click(chromedp.CSS(row+" button.revoke")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if got := b.text(t, row+" td.status"); got != "revoked" {
		t.Fatalf("status after revoke %q", got)
	}
	b.clean(t, "revocation")
	for _, k := range []string{secret, rotated} {
		if resp, raw := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", k, "x-gateway-virtual-key", "fake"); resp.StatusCode != 401 {
			t.Fatalf("chat with a revoked key: %d %s", resp.StatusCode, raw)
		}
	}

	// Virtual keys: the Caddyfile's, its provider key never shown.
	b.run(t, "virtual keys", chromedp.Navigate(base+"/virtual-keys"), chromedp.WaitVisible(chromedp.CSS("#virtual-keys")))
	if vks := b.text(t, "#virtual-keys"); !strings.Contains(vks, "fake") || strings.Contains(vks, "sk-test-provider") {
		t.Fatalf("virtual keys page: %q", vks)
	}
	b.shot(t, "virtual-keys")
	b.clean(t, "virtual keys")

	// Budgets: create one on the admin key, then edit its limit.
	b.run(t, "creating a budget", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS("#create-budget")),
		chromedp.SendKeys(chromedp.CSS("#bname"), "team budget"), chromedp.SendKeys(chromedp.CSS("#blimit"), "10"),
		chromedp.SetValue(chromedp.CSS("#bkey"), "admin"), chromedp.Submit(chromedp.CSS("#create-budget")),
		chromedp.WaitVisible(chromedp.CSS("#flash")))
	brow := `tr[data-budget="team budget"]`
	if got := b.text(t, brow+" td.limit"); got != "10" {
		t.Fatalf("new budget's limit %q", got)
	}
	// Reload first: the create's message is gone, so the edit's shows
	// when its page has loaded.
	b.run(t, "editing the budget", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS("#budgets")), chromedp.SetValue(chromedp.CSS(brow+" input[name=credit_limit]"), "25"),
		chromedp.Click(chromedp.CSS(brow+" button.rotate")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if got := b.text(t, brow+" td.limit"); got != "25" {
		t.Fatalf("edited budget's limit %q", got)
	}
	// Every key's spend: a budget on every key, which another key (the
	// Caddyfile's test key) then spends on through a real request; the
	// admin's page shows that key's spend and what it has left, as that
	// key's own usage view says.
	b.run(t, "creating a budget on every key", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS("#create-budget")),
		chromedp.SendKeys(chromedp.CSS("#bname"), "every key"), chromedp.SendKeys(chromedp.CSS("#blimit"), "10"),
		chromedp.Submit(chromedp.CSS("#create-budget")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if resp, raw := do(t, "POST", "/chat/completions", chat, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
		t.Fatalf("chat with the test key: %d %s", resp.StatusCode, raw)
	}
	var theirs struct {
		Limits []struct {
			Name            *string
			Used, Remaining float64
		} `json:"usage_limits"`
	}
	as(t, gatewayKey, "GET", "/usage/me", "", 200, &theirs)
	used, left := "", ""
	for _, l := range theirs.Limits {
		if l.Name != nil && *l.Name == "every key" {
			used, left = strconv.FormatFloat(l.Used, 'f', -1, 64), strconv.FormatFloat(l.Remaining, 'f', -1, 64)
		}
	}
	if used == "" || used == "0" {
		t.Fatalf("the test key's own view of the budget on every key: %+v", theirs.Limits)
	}
	srow := `#spend tr[data-policy="every key"][data-group="api_key=test"]`
	b.run(t, "every key's spend", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS(srow)))
	if got := b.text(t, srow+" td.used"); got != used {
		t.Fatalf("the test key's spend on the admin's page %q, its own view %q", got, used)
	}
	if got := b.text(t, srow+" td.remaining"); got != left {
		t.Fatalf("the test key's remaining on the admin's page %q, its own view %q", got, left)
	}
	if got := b.text(t, srow+" td.status"); got != "active" {
		t.Fatalf("the test key's status %q", got)
	}
	b.clean(t, "every key's spend")
	// Rate limits: create one for every key (far above this test's
	// traffic), then change its value.
	b.run(t, "creating a rate limit", chromedp.SendKeys(chromedp.CSS("#rname"), "per key"), chromedp.SendKeys(chromedp.CSS("#rvalue"), "1000"),
		chromedp.Submit(chromedp.CSS("#create-rate")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	rrow := `tr[data-rate="per key"]`
	if got := b.text(t, rrow+" td.limit"); got != "1000" {
		t.Fatalf("new rate limit %q", got)
	}
	b.run(t, "editing the rate limit", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS("#rates")),
		chromedp.SetValue(chromedp.CSS(rrow+" input[name=value]"), "2000"), chromedp.Click(chromedp.CSS(rrow+" button.rotate")),
		chromedp.WaitVisible(chromedp.CSS("#flash")))
	if got := b.text(t, rrow+" td.limit"); got != "2000" {
		t.Fatalf("edited rate limit %q", got)
	}
	// Usage: the signed-in key's count on the per-key limit, and a group
	// looked up on a limit per metadata.team.
	var team struct {
		ID string `json:"id"`
	}
	as(t, keysAdminKey, "POST", "/policies/rate-limits", `{"type":"requests","unit":"rpm","value":100,"name":"per team","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"metadata.team"}]}`, 200, &team)
	for i := 0; i < 3; i++ {
		if resp, _ := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", keysAdminKey, "x-gateway-virtual-key", "fake", "x-gateway-metadata", `{"team":"red"}`); resp.StatusCode != 200 {
			t.Fatalf("chat under the rate limits: %d", resp.StatusCode)
		}
	}
	trow := `tr[data-rate="per team"]`
	b.run(t, "rate-limit usage", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS(trow+" form.lookup")))
	if got := b.text(t, rrow+" td.rate-used"); got != "3 / 2000" {
		t.Fatalf("the key's usage of the rate limit %q, want 3 / 2000", got)
	}
	if got := b.text(t, rrow+" td.rate-window"); !strings.HasPrefix(got, "all free in ") {
		t.Fatalf("the window of the rate limit %q", got)
	}
	if got := b.text(t, trow+" td.rate-used"); !strings.HasPrefix(got, "per metadata.team") {
		t.Fatalf("a limit per team shows %q", got)
	}
	b.run(t, "looking up a team", chromedp.SendKeys(chromedp.CSS(trow+` input[name="metadata.team"]`), "red"),
		chromedp.Submit(chromedp.CSS(trow+" form.lookup")), chromedp.WaitVisible(chromedp.CSS(trow+" span.looked")))
	if got := b.text(t, trow+" span.looked"); !strings.HasPrefix(got, "metadata.team=red: 3 / 100, all free in ") {
		t.Fatalf("team red's usage %q", got)
	}
	b.shot(t, "budgets")
	b.clean(t, "budgets")

	// Configs: create one, open it, save a new version, find both
	// versions; JSON the API refuses is shown with its 400.
	b.run(t, "creating a config", chromedp.Navigate(base+"/configs"), chromedp.WaitVisible(chromedp.CSS("#create-config")),
		chromedp.SendKeys(chromedp.CSS("#cname"), "browser config"),
		chromedp.SetValue(chromedp.CSS("#cconfig"), `{"retry":{"attempts":2},"virtual_key":"fake"}`),
		chromedp.Submit(chromedp.CSS("#create-config")), chromedp.WaitVisible(chromedp.CSS("#flash")),
		chromedp.Click(chromedp.CSS("#configs tbody a")), chromedp.WaitVisible(chromedp.CSS("#edit-config")),
		chromedp.SetValue(chromedp.CSS("#config"), `{"retry":{"attempts":3},"virtual_key":"fake"}`),
		chromedp.Submit(chromedp.CSS("#edit-config")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if n := strings.Count(b.text(t, "#versions"), "show"); n != 2 {
		t.Fatalf("versions after one edit: %d", n)
	}
	if !strings.Contains(b.text(t, "#config"), `"attempts": 3`) && !strings.Contains(b.value(t, "#config"), `"attempts": 3`) {
		t.Fatalf("the editor does not show the saved version: %q", b.value(t, "#config"))
	}
	b.shot(t, "configs")
	b.clean(t, "configs")
	b.run(t, "saving a config the API refuses", chromedp.SetValue(chromedp.CSS("#config"), `{"strategy":{"mode":"nonsense"}}`),
		chromedp.Submit(chromedp.CSS("#edit-config")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if e := b.text(t, "#error"); !strings.Contains(e, "400") {
		t.Fatalf("refused config: %q", e)
	}
	// The page itself answered 400, which Chromium reports as a failed
	// load; nothing else may be reported.
	b.forget("the server responded with a status of 400")
	b.clean(t, "refused config")

	// Prompts: a prompt's versions and a render preview.
	as(t, keysAdminKey, "POST", "/prompts", `{"name":"greeting","string":"[{\"role\":\"user\",\"content\":\"Hello {{name}}\"}]","model":"gpt-4o-mini"}`, 200, nil)
	b.run(t, "prompts", chromedp.Navigate(base+"/prompts"), chromedp.WaitVisible(chromedp.CSS("#prompts")),
		chromedp.Click(chromedp.CSS(`tr[data-prompt="greeting"] a`)), chromedp.WaitVisible(chromedp.CSS("#render")),
		chromedp.SetValue(chromedp.CSS("#variables"), `{"name":"Ada"}`), chromedp.Submit(chromedp.CSS("#render")),
		chromedp.WaitVisible(chromedp.CSS("#rendered")))
	if got := b.text(t, "#rendered"); !strings.Contains(got, "Hello Ada") {
		t.Fatalf("rendered prompt %q", got)
	}
	b.shot(t, "prompts")
	b.clean(t, "prompts")

	// The admin key's logs, from its row's link, show each request's trace id.
	b.run(t, "logs", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")),
		chromedp.Click(chromedp.CSS(`tr[data-key="admin"] a.logs`)), chromedp.WaitVisible(chromedp.CSS("#logs")))
	logs := b.text(t, "#logs")
	for _, tr := range traces {
		if tr == "" || !strings.Contains(logs, tr) {
			t.Fatalf("trace %q not on the logs page", tr)
		}
	}
	b.shot(t, "logs")
	b.clean(t, "logs")

	// The playground sends through the gateway: its answer, its trace id
	// and its ledger record.
	before := up.count()
	b.run(t, "playground", chromedp.Navigate(base+"/playground"), chromedp.WaitVisible(chromedp.CSS("#play")),
		chromedp.SendKeys(chromedp.CSS("#virtual_key"), "fake"), chromedp.SendKeys(chromedp.CSS("#message"), "Say hello"),
		chromedp.Submit(chromedp.CSS("#play")), chromedp.WaitVisible(chromedp.CSS("#answer")))
	if got := b.text(t, "#answer-status"); got != "200" {
		t.Fatalf("playground status %q: %s", got, b.text(t, "main"))
	}
	if b.text(t, "#answer-text") == "" || up.count() != before+1 {
		t.Fatal("the playground's answer did not come from the provider")
	}
	trace := b.text(t, "#answer-trace")
	b.shot(t, "playground")
	b.clean(t, "playground")
	syncLedger(t)
	b.run(t, "logs after the playground", chromedp.Navigate(base+"/logs"), chromedp.WaitVisible(chromedp.CSS("#logs")))
	if !strings.Contains(b.text(t, "#logs"), trace) {
		t.Fatalf("the playground's request %q is not in the logs", trace)
	}
	b.clean(t, "logs after the playground")

	// Batches: a managed batch with its counts and result files.
	fileID := uploadBatchFile(t, gatewayURL(), openaiBatchLines(3, 0))
	batch := mustCreateBatch(t, gatewayURL(), fileID, "x-gateway-virtual-key", "fake")
	waitBatchDone(t, gatewayURL(), batch)
	b.run(t, "batches", chromedp.Navigate(base+"/batches"), chromedp.WaitVisible(chromedp.CSS("#batches")))
	if got := b.text(t, `tr[data-batch="`+batch+`"] td.status`); got != "completed" {
		t.Fatalf("batch status on the page %q", got)
	}
	b.shot(t, "batches")
	b.clean(t, "batches")
}

// consoleSiteLimited is consoleSite with llm_ratelimit in front of
// llm_gateway, as the example Caddyfile places it, so the budgets page
// has rate-limit usage to show.
func consoleSiteLimited(t testing.TB, upstream string) {
	t.Helper()
	os.Setenv("TEST_KEYS_ADMIN", keysAdminKey)
	os.Setenv("TEST_KEYS_ENC", keysEncryptionKey)
	s := &keysSite{Storage: t.TempDir()}
	s.LLM = fmt.Sprintf("api_key other "+otherKey+" {\n\t\t\torganisation_id "+keysOrg+"\n\t\t\tworkspace_id "+keysOtherWS+"\n\t\t}\n\t\tledger %q\n\t\tvirtual_key fake {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}",
		filepath.Join(t.TempDir(), "ledger.db"), upstream)
	newHTTPPort()
	cf := strings.Replace(s.caddyfile(), "\thandle /v1/* {", "\thandle_path /console/* {\n\t\tllm_console\n\t}\n\thandle /v1/* {\n\t\tllm_ratelimit", 1)
	loadCaddyfile(t, cf)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
}
