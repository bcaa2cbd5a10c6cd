// Command loadgen measures what the gateway adds to a request. In one
// process it starts a local OpenAI-compatible upstream and a Caddy with two
// sites in front of it, one through llm_gateway and one through a plain
// reverse_proxy, then drives the same chat request through each (and
// directly) at a fixed concurrency and prints throughput and latency
// percentiles. Run: go run ./bench/loadgen -n 20000 -c 32
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-llm-gateway/caddy-llm-gateway"
)

const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`

const body = `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in one word."}],"temperature":0.2}`

func main() {
	n := flag.Int("n", 20000, "requests per target")
	c := flag.Int("c", 32, "concurrent clients")
	flag.Parse()

	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	defer up.Close()

	gwPort, rpPort, adminPort := freePort(), freePort(), freePort()
	os.Setenv("LOADGEN_KEY", "loadgen-key-0123456789")
	cf := fmt.Sprintf(`{
	admin localhost:%d
	auto_https off
	persist_config off
	log {
		level ERROR
	}
	llm {
		api_key bench {env.LOADGEN_KEY}
	}
}
:%d {
	llm_gateway /v1/* {
		custom_host_allow loopback
	}
}
:%d {
	reverse_proxy %s
}
`, adminPort, gwPort, rpPort, up.Listener.Addr().String())
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		fail(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		fail(err)
	}
	defer caddy.Stop() //nolint:errcheck

	gwHeaders := http.Header{
		"Content-Type":          {"application/json"},
		"Authorization":         {"Bearer sk-x"},
		"X-Gateway-Api-Key":     {"loadgen-key-0123456789"},
		"X-Gateway-Provider":    {"openai"},
		"X-Gateway-Custom-Host": {up.URL},
	}
	plain := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-x"}}
	targets := []struct {
		name string
		url  string
		hdr  http.Header
	}{
		{"direct upstream", up.URL + "/v1/chat/completions", plain},
		{"caddy reverse_proxy", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", rpPort), plain},
		{"llm_gateway", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", gwPort), gwHeaders},
	}
	fmt.Printf("%d requests per target, %d concurrent clients, %d CPUs\n\n", *n, *c, runtimeCPUs())
	fmt.Printf("%-22s %12s %10s %10s %10s\n", "target", "req/s", "p50", "p90", "p99")
	var base result
	for i, t := range targets {
		run(t.url, t.hdr, *n/10, *c) // warm up connections
		r := run(t.url, t.hdr, *n, *c)
		fmt.Printf("%-22s %12.0f %10s %10s %10s\n", t.name, r.rps, r.p50, r.p90, r.p99)
		if i == 1 {
			base = r
		}
		if i == 2 {
			fmt.Printf("\nllm_gateway vs reverse_proxy: throughput ratio %.2f, added p50 %s, added p99 %s\n",
				r.rps/base.rps, r.p50-base.p50, r.p99-base.p99)
		}
	}
}

type result struct {
	rps           float64
	p50, p90, p99 time.Duration
}

func run(url string, hdr http.Header, n, c int) result {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}}
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failures atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
				req.Header = hdr.Clone()
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failures.Load(); f > 0 {
		fail(fmt.Errorf("%s: %d failed requests", url, f))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)].Round(time.Microsecond) }
	return result{rps: float64(n) / elapsed.Seconds(), p50: pct(0.50), p90: pct(0.90), p99: pct(0.99)}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}

func runtimeCPUs() int { return runtime.NumCPU() }
