package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
)

const benchBody = `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in one word."}],"temperature":0.2}`

// benchSite serves the gateway on /v1/* and a plain reverse_proxy to the
// same upstream on /plain/*, so both are measured in one Caddy.
func benchSite(t testing.TB, upstreamAddr string) {
	loadSite(t, site{
		Before: fmt.Sprintf("handle_path /plain/* {\n\t\trewrite * /v1{uri}\n\t\treverse_proxy %s\n\t}", upstreamAddr),
	})
}

// benchRequests posts the bench chat body to url b.N times.
func benchRequests(b *testing.B, url string, hdr http.Header) {
	benchPost(b, url, []byte(benchBody), hdr)
}

// benchPost posts body to url b.N times and expects 200s: the one loop
// of every gateway benchmark here.
func benchPost(b *testing.B, url string, body []byte, hdr http.Header) {
	client := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header = hdr.Clone()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkGatewayChat is one chat completion through llm_gateway to a
// local upstream; compare with BenchmarkPlainReverseProxyChat for the
// gateway's own cost. Allocations counted are the client's and the
// in-process server's together.
func BenchmarkGatewayChat(b *testing.B) {
	up := newFakeOpenAI(b)
	benchSite(b, up.Listener.Addr().String())
	benchRequests(b, gatewayURL()+"/chat/completions", http.Header{
		"Content-Type":          {"application/json"},
		"Authorization":         {"Bearer sk-test-provider"},
		"X-Gateway-Api-Key":     {gatewayKey},
		"X-Gateway-Provider":    {"openai"},
		"X-Gateway-Custom-Host": {up.URL},
	})
}

// BenchmarkPlainReverseProxyChat is the same request through a plain
// Caddy reverse_proxy: the baseline the gateway is measured against.
func BenchmarkPlainReverseProxyChat(b *testing.B) {
	up := newFakeOpenAI(b)
	benchSite(b, up.Listener.Addr().String())
	benchRequests(b, fmt.Sprintf("http://127.0.0.1:%d/plain/chat/completions", httpPort), http.Header{
		"Content-Type":  {"application/json"},
		"Authorization": {"Bearer sk-test-provider"},
	})
}

// BenchmarkGatewayChatTraced is BenchmarkGatewayChat with Caddy's tracing
// directive on, every request sampled, and the spans exported to nowhere
// (OTEL_TRACES_EXPORTER=none): the added cost of the server span and the
// attempt's CLIENT span with its GenAI attributes.
func BenchmarkGatewayChatTraced(b *testing.B) {
	b.Setenv("OTEL_TRACES_EXPORTER", "none")
	b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	up := newFakeOpenAI(b)
	loadSite(b, site{Before: "tracing {\n\t\tspan gateway\n\t}"})
	b.Cleanup(func() { loadSite(b, site{}) })
	benchRequests(b, gatewayURL()+"/chat/completions", http.Header{
		"Content-Type":          {"application/json"},
		"Authorization":         {"Bearer sk-test-provider"},
		"X-Gateway-Api-Key":     {gatewayKey},
		"X-Gateway-Provider":    {"openai"},
		"X-Gateway-Custom-Host": {up.URL},
	})
}
