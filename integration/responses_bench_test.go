package integration

import (
	"net/http"
	"testing"
)

func anthropicBenchHeader(url string) http.Header {
	return http.Header{
		"Content-Type":          {"application/json"},
		"Authorization":         {"Bearer " + anthropicKey},
		"X-Gateway-Api-Key":     {gatewayKey},
		"X-Gateway-Provider":    {"anthropic"},
		"X-Gateway-Custom-Host": {url},
	}
}

// BenchmarkResponsesAnthropic is one Responses create translated to
// Anthropic and back, stored (store defaults to true) in Caddy's file
// storage or not; compare with BenchmarkChatAnthropic, the same
// conversation as a chat completion, for the Responses layer's cost.
func BenchmarkResponsesAnthropic(b *testing.B) {
	up := responsesAnthropic(b)
	loadSite(b, site{})
	for _, c := range []struct{ name, body string }{
		{"stored", `{"model":"claude-sonnet-4-5","instructions":"You are terse.","input":"Say hello in one word.","temperature":0.2}`},
		{"unstored", `{"model":"claude-sonnet-4-5","instructions":"You are terse.","input":"Say hello in one word.","temperature":0.2,"store":false}`},
		{"stream", `{"model":"claude-sonnet-4-5","instructions":"You are terse.","input":"Say hello in one word.","temperature":0.2,"store":false,"stream":true}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchPost(b, gatewayURL()+"/responses", []byte(c.body), anthropicBenchHeader(up.URL))
		})
	}
}

// BenchmarkChatAnthropic is the baseline of BenchmarkResponsesAnthropic.
func BenchmarkChatAnthropic(b *testing.B) {
	up := responsesAnthropic(b)
	loadSite(b, site{})
	for _, c := range []struct{ name, body string }{
		{"whole", `{"model":"claude-sonnet-4-5","max_tokens":4096,` + benchBody[len(`{"model":"m",`):]},
		{"stream", `{"model":"claude-sonnet-4-5","max_tokens":4096,"stream":true,` + benchBody[len(`{"model":"m",`):]},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchPost(b, gatewayURL()+"/chat/completions", []byte(c.body), anthropicBenchHeader(up.URL))
		})
	}
}
