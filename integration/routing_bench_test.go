package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Routing benchmarks run the whole path in process: client → Caddy →
// llm_gateway → Caddy's http transport → a local upstream that answers at once. The
// allocations counted are the whole process's (client, server, gateway
// and upstream). Compare:
//
//	BenchmarkRouteSingle       one target, the baseline
//	BenchmarkRouteFallbackHop  a first target answering 503, then the
//	                           baseline's target: the difference is the
//	                           cost of one fallback hop
//	BenchmarkRouteCacheHit     the baseline's request answered from the
//	                           response cache (no upstream call)

const benchAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`

func benchUpstream(b *testing.B, status int) string {
	body := []byte(benchAnswer)
	if status != 200 {
		body = []byte(`{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

func benchTarget(url, extra string) string {
	return fmt.Sprintf(`{"provider":"openai","api_key":"sk-bench","custom_host":%q%s}`, url, extra)
}

func benchRoute(b *testing.B, config string, wantCache string) {
	loadFresh(b, site{})
	body := []byte(chatBody)
	send := func(want string) {
		req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("x-gateway-api-key", gatewayKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-gateway-config", config)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (want != "" && resp.Header.Get("x-gateway-cache-status") != want) {
			b.Fatalf("status %d cache %q", resp.StatusCode, resp.Header.Get("x-gateway-cache-status"))
		}
	}
	send("") // warm connections, the config cache and (for the cache case) the entry
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		send(wantCache)
	}
}

func BenchmarkRouteSingle(b *testing.B) {
	benchRoute(b, benchTarget(benchUpstream(b, 200), ""), "DISABLED")
}

func BenchmarkRouteFallbackHop(b *testing.B) {
	cfg := `{"strategy":{"mode":"fallback"},"targets":[` + benchTarget(benchUpstream(b, 503), "") + `,` + benchTarget(benchUpstream(b, 200), "") + `]}`
	benchRoute(b, cfg, "DISABLED")
}

func BenchmarkRouteCacheHit(b *testing.B) {
	benchRoute(b, benchTarget(benchUpstream(b, 200), `,"cache":{"mode":"simple"}`), "HIT")
}
