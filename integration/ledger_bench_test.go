package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
)

// BenchmarkGatewayChatLedger is BenchmarkGatewayChat with the usage
// ledger on (embedded SQLite): the difference is what recording costs a
// request end to end, the writer's batches included (they run on the
// same CPUs).
func BenchmarkGatewayChatLedger(b *testing.B) {
	up := newFakeOpenAI(b)
	loadSite(b, site{
		LLM:    fmt.Sprintf("ledger %q", filepath.Join(b.TempDir(), "ledger.db")),
		Before: fmt.Sprintf("handle_path /plain/* {\n\t\trewrite * /v1{uri}\n\t\treverse_proxy %s\n\t}", up.Listener.Addr().String()),
	})
	benchRequests(b, gatewayURL()+"/chat/completions", http.Header{
		"Content-Type":          {"application/json"},
		"Authorization":         {"Bearer sk-test-provider"},
		"X-Gateway-Api-Key":     {gatewayKey},
		"X-Gateway-Provider":    {"openai"},
		"X-Gateway-Custom-Host": {up.URL},
	})
}
