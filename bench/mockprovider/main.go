// Command mockprovider is the OpenAI-compatible provider the comparison
// benchmark (bench/compare.sh) puts behind plain Caddy and behind the
// gateway. It answers POST /v1/chat/completions with a fixed JSON answer,
// or with an SSE stream when the body asks for "stream": true, after an
// optional latency, so runs are CPU-bound (no latency) or show the added
// latency below saturation (with one). It listens on loopback only.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"
)

const answer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog, and then it runs far away across the wide green field while the dog sleeps on in the warm afternoon sun, dreaming of nothing at all."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":24,"completion_tokens":40,"total_tokens":64}}`

func main() {
	addr := flag.String("addr", "127.0.0.1:9101", "listen address (loopback only)")
	latency := flag.Duration("latency", 0, "delay before the answer starts")
	chunks := flag.Int("chunks", 20, "content chunks per stream")
	chunkDelay := flag.Duration("chunk-delay", 0, "delay between stream chunks")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("mockprovider: %q is not a loopback address", *addr)
	}
	streamBody := buildStream(*chunks)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if *latency > 0 {
			time.Sleep(*latency)
		}
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			_, _ = io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		f, _ := w.(http.Flusher)
		for _, ev := range streamBody {
			_, _ = w.Write(ev)
			if f != nil {
				f.Flush()
			}
			if *chunkDelay > 0 {
				time.Sleep(*chunkDelay)
			}
		}
	})
	log.Printf("mockprovider listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, h))
}

// buildStream returns the events of one streamed answer: a role chunk,
// content chunks, a finish chunk, a usage chunk and [DONE].
func buildStream(n int) [][]byte {
	const head = `{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[`
	var evs [][]byte
	add := func(s string) { evs = append(evs, []byte("data: "+s+"\n\n")) }
	add(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	for i := 0; i < n; i++ {
		add(head + fmt.Sprintf(`{"index":0,"delta":{"content":"word%d "},"finish_reason":null}]}`, i))
	}
	add(head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	add(head + `],"usage":{"prompt_tokens":24,"completion_tokens":` + strconv.Itoa(n) + `,"total_tokens":` + strconv.Itoa(24+n) + `}}`)
	evs = append(evs, []byte("data: [DONE]\n\n"))
	return evs
}
