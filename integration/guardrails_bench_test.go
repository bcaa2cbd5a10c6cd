package integration

import (
	"net/http"
	"testing"
)

// benchGuardConfig is a config to up, with hooks appended when given.
func benchGuardConfig(b *testing.B, up *fakeOpenAI, hooks string) http.Header {
	return http.Header{
		"Content-Type":       {"application/json"},
		"X-Gateway-Api-Key":  {gatewayKey},
		"X-Gateway-Config":   {compactJSON(b, target(up, hooks))},
		"X-Gateway-Trace-Id": {"bench"},
	}
}

// BenchmarkGatewayChatConfigNoHooks is a chat completion with an inline
// config and no hooks: the baseline of BenchmarkGatewayChatTwoChecks.
func BenchmarkGatewayChatConfigNoHooks(b *testing.B) {
	up := newFakeOpenAI(b)
	benchSite(b, up.Listener.Addr().String())
	benchRequests(b, gatewayURL()+"/chat/completions", benchGuardConfig(b, up, ""))
}

// BenchmarkGatewayChatTwoChecks is the same request with two cheap input
// checks (a regex and a word count, deny on failure): the end-to-end cost
// of guardrails (issue 10: at most 20 µs).
func BenchmarkGatewayChatTwoChecks(b *testing.B) {
	up := newFakeOpenAI(b)
	benchSite(b, up.Listener.Addr().String())
	benchRequests(b, gatewayURL()+"/chat/completions", benchGuardConfig(b, up,
		`"input_guardrails":[{"default.regexMatch":{"rule":"(?i)ignore (all|previous) instructions","not":true},"default.wordCount":{"minWords":1,"maxWords":500},"deny":true}]`))
}
