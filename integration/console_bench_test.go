package integration

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkConsolePages measures the console's pages through a real
// Caddy: 1,000 API keys and 500 ledger records, each page signed in,
// its API calls included (go test ./integration -run '^$' -bench
// ConsolePages -benchtime 200x).
func BenchmarkConsolePages(b *testing.B) {
	up := newFakeOpenAI(b)
	consoleSite(b, up.URL)
	for i := 0; i < 1000; i++ {
		if resp, raw := do(b, "POST", "/api-keys/workspace/service", []byte(fmt.Sprintf(`{"name":"bench-%d","scopes":["completions.write"]}`, i)), "x-gateway-api-key", keysAdminKey); resp.StatusCode != 200 {
			b.Fatalf("creating a key: %d %s", resp.StatusCode, raw)
		}
	}
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	for i := 0; i < 500; i++ {
		do(b, "POST", "/chat/completions", chat, "x-gateway-api-key", keysAdminKey, "x-gateway-virtual-key", "fake")
	}
	syncLedger(b)
	c := newConsoleClient(b)
	c.signIn(keysAdminKey)
	for _, page := range []string{"/", "/keys", "/logs", "/budgets"} {
		b.Run(page, func(b *testing.B) {
			for b.Loop() {
				if code, _ := c.send("GET", page, nil); code != http.StatusOK {
					b.Fatalf("%s: %d", page, code)
				}
			}
		})
	}
}
