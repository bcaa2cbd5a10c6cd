package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// pageShots is where TestConsolePagesInBrowser writes its screenshots:
// docs/console (the pictures of docs/console.md) when
// CONSOLE_SCREENSHOTS=1, else a temporary directory, so a test run does
// not change the tree.
func pageShots(t *testing.T) string {
	if os.Getenv("CONSOLE_SCREENSHOTS") == "1" {
		return filepath.Join("..", "docs", "console")
	}
	return t.TempDir()
}

// shotTo saves a screenshot of the page as dir/name.png.
func (b *browser) shotTo(t *testing.T, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsolePagesInBrowser drives the pages that finish the console's
// job in headless Chromium against a real Caddy: a prompt created, edited
// (a new version) and published, which the render API then uses; a
// config edited, compared with its first version and rolled back to it,
// which the configs API then answers; a key created with a typo'd scope,
// refused beside its form with what was typed kept; the administrator's
// budgets view with another key's spend flagged over its limit; and
// every page at 390 px wide without a sideways scroll. No page may
// report a console error or a CSP violation.
func TestConsolePagesInBrowser(t *testing.T) {
	b := newBrowser(t)
	up := newFakeOpenAI(t)
	consoleSiteLimited(t, up.URL)
	shots := pageShots(t)
	base := consoleURL()
	b.run(t, "signing in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin")),
		chromedp.SendKeys(chromedp.CSS("#key"), keysAdminKey), chromedp.Submit(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#requests")))
	b.clean(t, "sign-in")

	// A prompt: created (its first version published), edited into a
	// second version, which callers get once it is published.
	b.run(t, "creating a prompt", chromedp.Navigate(base+"/prompts"), chromedp.WaitVisible(chromedp.CSS("#create-prompt")),
		chromedp.SendKeys(chromedp.CSS("#pname"), "welcome"), chromedp.SetValue(chromedp.CSS("#pmodel"), "gpt-4o-mini"),
		chromedp.SetValue(chromedp.CSS("#ptemplate"), `[{"role":"user","content":"Hello {{name}}"}]`),
		chromedp.Submit(chromedp.CSS("#create-prompt")), chromedp.WaitVisible(chromedp.CSS("#edit-prompt")))
	promptID := b.value(t, `#edit-prompt input[name="id"]`)
	render := func() string {
		var out struct {
			Data struct {
				Messages []struct {
					Content string `json:"content"`
				} `json:"messages"`
			} `json:"data"`
		}
		as(t, keysAdminKey, "POST", "/prompts/"+promptID+"/render", `{"variables":{"name":"Ada"}}`, 200, &out)
		if len(out.Data.Messages) == 0 {
			t.Fatal("the render answered no message")
		}
		return out.Data.Messages[0].Content
	}
	if got := render(); got != "Hello Ada" {
		t.Fatalf("the new prompt renders %q", got)
	}
	b.run(t, "editing the prompt", chromedp.SetValue(chromedp.CSS("#template"), `[{"role":"user","content":"Welcome, {{name}}!"}]`),
		chromedp.SetValue(chromedp.CSS("#pdesc"), "warmer"), chromedp.Submit(chromedp.CSS("#edit-prompt")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-version="2"]`)))
	if b.has(t, `tr[data-version="2"].published`) || !b.has(t, `tr[data-version="1"].published`) {
		t.Fatal("a new version was published on saving")
	}
	if got := render(); got != "Hello Ada" {
		t.Fatalf("an unpublished version is served: %q", got)
	}
	b.run(t, "publishing version 2", chromedp.Click(chromedp.CSS(`tr[data-version="2"] button.publish`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-version="2"].published`)))
	if got := render(); got != "Welcome, Ada!" {
		t.Fatalf("the published version renders %q", got)
	}
	b.shotTo(t, shots, "prompt-edit")
	b.clean(t, "prompt edit and publish")

	// A config: created, saved as a second version, compared with the
	// first, and rolled back, which saves the first's config as a third.
	b.run(t, "creating a config", chromedp.Navigate(base+"/configs"), chromedp.WaitVisible(chromedp.CSS("#create-config")),
		chromedp.SendKeys(chromedp.CSS("#cname"), "rollback me"),
		chromedp.SetValue(chromedp.CSS("#cconfig"), `{"retry":{"attempts":2},"virtual_key":"fake"}`),
		chromedp.Submit(chromedp.CSS("#create-config")), chromedp.WaitVisible(chromedp.CSS("#flash")),
		chromedp.Click(chromedp.CSS("#configs tbody a")), chromedp.WaitVisible(chromedp.CSS("#edit-config")),
		chromedp.SetValue(chromedp.CSS("#config"), `{"retry":{"attempts":5},"virtual_key":"fake"}`),
		chromedp.Submit(chromedp.CSS("#edit-config")), chromedp.WaitVisible(chromedp.CSS("#diff")))
	slug := b.value(t, `#edit-config input[name="slug"]`)
	if del, add := b.text(t, "#diff .del"), b.text(t, "#diff .add"); !strings.Contains(del, `"attempts": 2`) || !strings.Contains(add, `"attempts": 5`) {
		t.Fatalf("the diff of versions 1 and 2: - %q + %q", del, add)
	}
	b.shotTo(t, shots, "config-diff")
	b.run(t, "rolling back to version 1", chromedp.Click(chromedp.CSS(`tr[data-version="1"] button.rollback`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-version="3"]`)))
	if !strings.Contains(b.text(t, "#flash"), "version 3 is version 1") {
		t.Fatalf("the rollback's message %q", b.text(t, "#flash"))
	}
	var cur struct {
		Config struct {
			Retry struct {
				Attempts int `json:"attempts"`
			} `json:"retry"`
		} `json:"config"`
	}
	as(t, keysAdminKey, "GET", "/configs/"+slug, "", 200, &cur)
	if cur.Config.Retry.Attempts != 2 {
		t.Fatalf("after the rollback the API answers attempts %d, want 2", cur.Config.Retry.Attempts)
	}
	var vs struct {
		Data []json.RawMessage `json:"data"`
	}
	as(t, keysAdminKey, "GET", "/configs/"+slug+"/versions", "", 200, &vs)
	if len(vs.Data) != 3 {
		t.Fatalf("%d versions after the rollback, want 3 (history kept)", len(vs.Data))
	}
	b.clean(t, "config diff and rollback")

	// A typo'd scope: the API's 400 beside the create form, what was
	// typed still in it.
	b.run(t, "a key with a typo'd scope", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#create")),
		chromedp.SendKeys(chromedp.CSS("#name"), "typo-key"), chromedp.SetValue(chromedp.CSS("#scopes"), "completions.write, logsread"),
		chromedp.Submit(chromedp.CSS("#create")), chromedp.WaitVisible(chromedp.CSS("#create #error")))
	if got := b.text(t, "#create #error"); !strings.Contains(got, "unknown scope") || !strings.Contains(got, "logsread") {
		t.Fatalf("the refusal beside the form %q", got)
	}
	if n, s := b.value(t, "#name"), b.value(t, "#scopes"); n != "typo-key" || s != "completions.write, logsread" {
		t.Fatalf("the form after the refusal: name %q scopes %q", n, s)
	}
	// The page is the console's, under its mount: its links and style
	// sheet start with /console.
	if !b.has(t, `nav a[href="/console/keys"]`) || !b.has(t, `link[href="/console/static/console.css"]`) {
		t.Fatal("the refused form's page lost the console's prefix")
	}
	b.shotTo(t, shots, "key-form-error")
	b.forget("the server responded with a status of 400")
	b.clean(t, "a typo'd scope")

	// The administrator's view: a budget on the test key far below one
	// request's cost, spent by that key; the admin's page shows its spend
	// as the key's own usage view does, flagged over.
	as(t, keysAdminKey, "POST", "/policies/usage-limits", `{"name":"tiny","type":"cost","credit_limit":0.000001,"periodic_reset":"monthly",`+
		`"conditions":[{"key":"api_key","value":"test"}],"group_by":[{"key":"api_key"}]}`, 200, nil)
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if resp, raw := do(t, "POST", "/chat/completions", chat, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
		t.Fatalf("chat with the test key: %d %s", resp.StatusCode, raw)
	}
	var theirs struct {
		Limits []struct {
			Name *string
			Used float64
		} `json:"usage_limits"`
	}
	as(t, gatewayKey, "GET", "/usage/me", "", 200, &theirs)
	used := ""
	for _, l := range theirs.Limits {
		if l.Name != nil && *l.Name == "tiny" {
			used = strconv.FormatFloat(l.Used, 'f', -1, 64)
		}
	}
	if used == "" || used == "0" {
		t.Fatalf("the test key's own view of the tiny budget: %+v", theirs.Limits)
	}
	srow := `#spend tr[data-policy="tiny"][data-group="api_key=test"]`
	b.run(t, "the budgets view", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS(srow)))
	if got := b.text(t, srow+" td.used"); got != used {
		t.Fatalf("the test key's spend on the admin's view %q, its own %q", got, used)
	}
	if !b.has(t, srow+".exhausted") || !b.has(t, srow+" td.share .flag.over") {
		t.Fatalf("the exhausted group is not flagged: %q", b.text(t, srow))
	}
	if got := b.text(t, "#spend-flags"); !strings.HasPrefix(got, "1 over") {
		t.Fatalf("the view's counts %q", got)
	}
	b.shotTo(t, shots, "budgets-admin")
	b.clean(t, "the budgets view")

	// Every page at a phone's width: nothing scrolls the page sideways.
	keyID := ""
	var keys struct {
		Data []struct {
			ID, Name, Source string
		} `json:"data"`
	}
	as(t, keysAdminKey, "GET", "/api-keys", "", 200, &keys)
	for _, k := range keys.Data {
		if k.Source != "config" {
			keyID = k.ID
		}
	}
	pages := []string{"/", "/keys", "/virtual-keys", "/configs", "/configs?slug=" + slug, "/prompts", "/prompts?id=" + promptID,
		"/budgets", "/batches", "/logs", "/breakdowns", "/users", "/playground"}
	if keyID != "" {
		pages = append(pages, "/keys/edit?id="+keyID)
	}
	b.run(t, "a phone's width", chromedp.EmulateViewport(390, 844))
	for _, p := range pages {
		b.run(t, "at 390 px: "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("main")))
		w, err := chromedp.Run(b.ctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth"))
		if err != nil {
			t.Fatal(err)
		}
		if w > 390 {
			t.Errorf("%s is %d px wide at 390 px", p, w)
		}
		b.clean(t, "at 390 px: "+p)
	}
	b.run(t, "the keys at 390 px", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	b.shotTo(t, shots, "narrow-keys")
	b.run(t, "the budgets at 390 px", chromedp.Navigate(base+"/budgets"), chromedp.WaitVisible(chromedp.CSS("#spend")))
	b.shotTo(t, shots, "narrow-budgets")
	b.clean(t, "narrow screenshots")
	// And the sign-in page, signed out.
	b.run(t, "signing out", chromedp.Submit(chromedp.CSS("form.signout")), chromedp.WaitVisible(chromedp.CSS("#signin")))
	if w, err := chromedp.Run(b.ctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth")); err != nil || w > 390 {
		t.Errorf("the sign-in page is %d px wide at 390 px (%v)", w, err)
	}
	b.clean(t, "the sign-in page at 390 px")
}
