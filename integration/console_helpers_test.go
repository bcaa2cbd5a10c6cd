package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// consoleSite is a keys site (an organisation admin key, the keys API)
// with a key "other" in another workspace of the organisation, an
// SQLite ledger, a virtual key "fake" on the fake OpenAI at
// upstream, and the console mounted under /console/.
func consoleSite(t testing.TB, upstream string) {
	t.Helper()
	consoleSiteWith(t, upstream, filepath.Join(t.TempDir(), "ledger.db"), "")
}

// consoleSiteWith is consoleSite with its ledger at ledgerPath and extra
// lines in the llm block (such as a redis block, where the keys then
// live).
func consoleSiteWith(t testing.TB, upstream, ledgerPath, extra string) {
	t.Helper()
	// newKeysSite's setup, for benchmarks too.
	os.Setenv("TEST_KEYS_ADMIN", keysAdminKey)
	os.Setenv("TEST_KEYS_ENC", keysEncryptionKey)
	s := &keysSite{Storage: t.TempDir()}
	s.LLM = fmt.Sprintf("api_key other "+otherKey+" {\n\t\t\torganisation_id "+keysOrg+"\n\t\t\tworkspace_id "+keysOtherWS+"\n\t\t}\n\t\tledger %q\n\t\tvirtual_key fake {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}\n\t\t%s",
		ledgerPath, upstream, extra)
	newHTTPPort()
	cf := strings.Replace(s.caddyfile(), "\thandle /v1/* {", "\thandle_path /console/* {\n\t\tllm_console\n\t}\n\thandle /v1/* {", 1)
	loadCaddyfile(t, cf)
	// Cleanups run last first: stop the site before the test's
	// directories (its storage and ledger) are removed, since it may
	// still be writing there ("directory not empty", ~1 run in 15).
	t.Cleanup(func() { loadSite(t, site{}) })
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
}

// consoleURL is the console's address on the current site.
func consoleURL() string { return fmt.Sprintf("http://127.0.0.1:%d/console", httpPort) }

// consoleClient is a browser-like client of the console: a cookie jar,
// no redirects followed, so each answer's status is seen.
type consoleClient struct {
	t    testing.TB
	c    *http.Client
	csrf string
}

func newConsoleClient(t testing.TB) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// send makes one request and returns its status and body, remembering
// the page's CSRF token.
func (c *consoleClient) send(method, path string, form url.Values) (int, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, consoleURL()+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(b); m != nil {
		c.csrf = string(m[1])
	}
	return resp.StatusCode, string(b)
}

// signIn signs key in, failing unless the console accepts it.
func (c *consoleClient) signIn(key string) {
	c.t.Helper()
	if code, body := c.send("POST", "/signin", url.Values{"key": {key}}); code != http.StatusSeeOther {
		c.t.Fatalf("sign-in: %d %s", code, body)
	}
	if code, _ := c.send("GET", "/keys", nil); code != 200 || c.csrf == "" {
		c.t.Fatalf("keys page after sign-in: %d", code)
	}
}
