// Lost batch results (issue 21): an output over the file store's limit
// reported "completed" with no output file, and a Redis outage mid-batch
// reported 600/600 with 300 lines in the files. Now the counts are always
// the lines in the files.

package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// TestBatchesHardeningOutputOverStoreLimit: 40 answers of ~4 KB with a
// 64 KiB store limit: the batch fails with output_too_large, the output
// file holds the lines that fit, the error file the others.
func TestBatchesHardeningOutputOverStoreLimit(t *testing.T) {
	up := newCountingProvider(t)
	big := strings.Repeat("z", 4000)
	up.answer = func(int32) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` + big + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	}
	loadFresh(t, site{LLM: "batches {\n\t\t\tmax_file_size 64KiB\n\t\t}"})
	base := gatewayURL()
	file := uploadBatchFile(t, base, openaiBatchLines(40, 0))
	b := waitBatchDone(t, base, mustCreateBatch(t, base, file,
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1", "Authorization", "Bearer sk-x"))
	out, errs := checkCountsMatchFiles(t, base, b)
	if b.Get("status").Str != "failed" || b.Get("errors.data.0.code").Str != "output_too_large" ||
		!strings.Contains(b.Get("errors.data.0.message").Str, "65536") {
		t.Fatalf("batch %s", b.Raw)
	}
	if len(out) == 0 || len(out)+len(errs) != 40 || b.Get("request_counts.total").Int() != 40 {
		t.Fatalf("%d output and %d error lines of 40", len(out), len(errs))
	}
	if errs[len(errs)-1].Get("error.code").Str != "output_too_large" {
		t.Fatalf("last error line %s", errs[len(errs)-1].Raw)
	}
	_, meta := bcall(t, "GET", base, "/files/"+b.Get("output_file_id").Str, nil, "")
	if n := gjson.GetBytes(meta, "bytes").Int(); n == 0 || n > 64<<10 {
		t.Fatalf("output file of %d bytes", n)
	}
	// An upload over the configured limit is a 413.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(openaiBatchLines(300, 200))
	_ = mw.Close()
	if status, body := bcall(t, "POST", base, "/files", buf.Bytes(), mw.FormDataContentType()); status != 413 ||
		gjson.GetBytes(body, "error.code").Str != "file_too_large" {
		t.Fatalf("upload over the limit: %d %s", status, body)
	}
}

// cutProxy forwards TCP connections to a target until cut: then it
// closes every open connection and every new one (or, with hold set,
// keeps new ones open unanswered, as a firewalled host looks), until
// restored.
type cutProxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	hold   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed atomic.Int32
}

func newCutProxy(t testing.TB, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() && p.hold.Load() {
				p.mu.Lock()
				p.conns[c] = true
				p.mu.Unlock()
				continue
			}
			if p.down.Load() {
				p.closed.Add(1)
				_ = c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
			}
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		p.closed.Add(1)
	}
	p.conns = map[net.Conn]bool{}
}

// batchesOutageDB is the Redis database of the outage test.
const batchesOutageDB = 13

// TestBatchesHardeningRedisOutage cuts the gateway's Redis for 1.5 s
// while a 600-line batch runs: the batch pauses, retries its writes, and
// completes with every line in its files.
func TestBatchesHardeningRedisOutage(t *testing.T) {
	rdb := redistest.Client(t, batchesOutageDB)
	proxy := newCutProxy(t, redistest.Addr())
	up := newCountingProvider(t)
	var (
		once         sync.Once
		restored     = make(chan struct{})
		callsAtCut   atomic.Int32
		callsRestore atomic.Int32
	)
	up.hold = func(n int32) {
		if n == 300 {
			once.Do(func() {
				go func() {
					callsAtCut.Store(up.calls.Load())
					proxy.cut()
					time.Sleep(1500 * time.Millisecond)
					callsRestore.Store(up.calls.Load())
					proxy.down.Store(false)
					close(restored)
				}()
			})
		}
	}
	loadFresh(t, site{LLM: fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}", proxy.addr(), batchesOutageDB)})
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, "llm_gateway/*").Result()
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	base := gatewayURL()
	file := uploadBatchFile(t, base, openaiBatchLines(600, 0))
	id := mustCreateBatch(t, base, file, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1", "Authorization", "Bearer sk-x")
	<-restored
	b := waitBatchDone(t, base, id)
	out, errs := checkCountsMatchFiles(t, base, b)
	if b.Get("status").Str != "completed" || len(out) != 600 || len(errs) != 0 {
		t.Fatalf("batch %s: %d output, %d error lines", b.Raw, len(out), len(errs))
	}
	if proxy.closed.Load() == 0 || callsRestore.Load() >= 600 {
		t.Fatalf("the outage did not happen during the batch: %d connections cut, %d calls by the restore",
			proxy.closed.Load(), callsRestore.Load())
	}
	t.Logf("calls at the cut %d, at the restore %d (the batch paused)", callsAtCut.Load(), callsRestore.Load())
}
