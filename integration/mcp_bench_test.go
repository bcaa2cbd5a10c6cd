package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A relayed tools/call against the same call made to the server
// directly, one at a time, with go-sdk clients on both sides:
//
//	go test ./integration/ -run '^$' -bench 'MCPToolCall' -benchtime 2000x -count 3
//
// Both sub-benchmarks call one fake server (Streamable HTTP, the SDK's
// default, stateful) whose tool echoes its arguments; "relayed" goes
// through llm_mcp on /mcp in this process's Caddy. Besides ns/op and
// allocs/op (the whole process's: client, gateway and server), each
// reports the p50 and p99 of the calls' latencies in µs. The gateway's
// cost is relayed minus direct.
func BenchmarkMCPToolCall(b *testing.B) {
	f := newFakeMCP(b, false, fakeTool{name: "echo"})
	loadFresh(b, mcpSite(b, mcpServerBlock("bench", f.URL, "allow test"), "egress_allow loopback"))
	args := map[string]any{"path": "README.md", "n": 1}
	run := func(b *testing.B, cs *sdk.ClientSession, name string) {
		ctx := context.Background()
		// One call first: the gateway's upstream session and listing.
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args}); err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
			lat = append(lat, time.Since(start))
			if err != nil || res.IsError {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("direct", func(b *testing.B) {
		run(b, mcpClientVia(b, f.URL, nil, nil), "echo")
	})
	b.Run("relayed", func(b *testing.B) {
		run(b, mcpClient(b, mcpURL(""), gatewayKey, nil), "bench__echo")
	})
}
