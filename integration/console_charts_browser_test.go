package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleChartsInBrowser drives the overview's chart, the breakdowns
// and the users page in headless Chromium against a real Caddy with the
// in-process IdP: the chart has both axes with labelled ticks and a
// focusable bucket whose label gives its values, a breakdown row leads
// to the logs filtered by its value, and the users page lists the token
// user who called the gateway, with no console error or CSP violation
// on any page.
func TestConsoleChartsInBrowser(t *testing.T) {
	b := newBrowser(t)
	is := newIdP(t)
	up := newFakeOpenAI(t)
	consoleOIDCSite(t, is, up.URL)
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	for i := 0; i < 3; i++ {
		if resp, raw := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", keysAdminKey, "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, raw)
		}
	}
	claims := is.Std("bob", is.Audience, 5*time.Minute)
	claims["groups"] = []string{"users"}
	if resp, raw := do(t, "POST", "/chat/completions", chat, "x-gateway-api-key", is.Mint(claims), "x-gateway-virtual-key", "fake"); resp.StatusCode != 200 {
		t.Fatalf("chat with bob's token: %d %s", resp.StatusCode, raw)
	}
	syncLedger(t)
	base := consoleURL()
	b.run(t, "signing in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin")),
		chromedp.SendKeys(chromedp.CSS("#key"), keysAdminKey), chromedp.Submit(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#chart")))
	count := func(sel string) int {
		n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int]("document.querySelectorAll("+jsString(sel)+").length"))
		if err != nil {
			t.Fatalf("counting %s: %v", sel, err)
		}
		return n
	}
	for sel, least := range map[string]int{"#chart line.x-axis": 1, "#chart line.y-axis-line": 1, "#chart text.tick.x": 2,
		"#chart text.tick.y": 5, "#chart text.chart-title": 1, `#chart g.bucket[tabindex="0"]`: 1} {
		if got := count(sel); got < least {
			t.Errorf("chart: %d of %s, want at least %d", got, sel, least)
		}
	}
	// Keyboard focus reaches a bucket, whose label gives its values (the
	// same text as its hover title).
	label, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(() => { const g = document.querySelector('#chart g.bucket[tabindex="0"]'); g.focus();
		const a = document.activeElement; return a === g && a.querySelector('title').textContent === a.getAttribute('aria-label') ? a.getAttribute('aria-label') : ''; })()`))
	if err != nil || !strings.Contains(label, "4 requests") || !strings.Contains(label, " tokens, ") || !strings.Contains(label, " USD") {
		t.Fatalf("the focused bucket says %q (%v), want its 4 requests, tokens and cost", label, err)
	}
	b.shot(t, "chart")
	b.clean(t, "overview with its chart")

	b.run(t, "breakdown by model", chromedp.Navigate(base+"/breakdowns?by=model&range=24h"), chromedp.WaitVisible(chromedp.CSS("#breakdown")))
	if got := b.text(t, "#breakdown tbody tr td a.drill"); got != "gpt-4o-mini" {
		t.Fatalf("breakdown by model: first row %q", got)
	}
	b.shot(t, "breakdowns")
	b.clean(t, "breakdowns")
	b.run(t, "drill down", chromedp.Click(chromedp.CSS("#breakdown a.drill")), chromedp.WaitVisible(chromedp.CSS("#logs")))
	if got := b.value(t, "#model"); got != "gpt-4o-mini" {
		t.Fatalf("the logs page's model filter is %q after the drill-down", got)
	}
	if got := b.text(t, ".count"); got != "4 records" {
		t.Fatalf("logs after the drill-down: %q, want 4 records", got)
	}
	b.clean(t, "logs from a breakdown")

	b.run(t, "breakdown by user", chromedp.Navigate(base+"/breakdowns?by=user&range=24h"), chromedp.WaitVisible(chromedp.CSS("#breakdown")))
	if got := b.text(t, "#breakdown tbody tr td a.drill"); got != "user:bob" {
		t.Fatalf("breakdown by user: first row %q", got)
	}
	b.clean(t, "breakdown by user")

	b.run(t, "users page", chromedp.Navigate(base+"/users"), chromedp.WaitVisible(chromedp.CSS("#users")))
	if got := b.text(t, `tr[data-user="user:bob"] td.requests`); got != "1" {
		t.Fatalf("users page: bob's requests %q, want 1", got)
	}
	if got := b.text(t, `tr[data-user="user:bob"] td.status`); got != "active" {
		t.Fatalf("users page: bob's status %q", got)
	}
	b.shot(t, "users")
	b.clean(t, "users page")

	b.run(t, "keys page", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if got := b.text(t, `tr[data-key="admin"] td.requests`); got != "3" {
		t.Fatalf("keys page: the admin key's requests %q, want 3", got)
	}
	b.clean(t, "keys page with use")
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
