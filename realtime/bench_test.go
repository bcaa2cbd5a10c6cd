package realtime

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// audioDelta is a typical provider message: 20 ms of 24 kHz PCM16 as
// base64, about 1.3 KB.
var audioDelta = []byte(`{"type":"response.output_audio.delta","event_id":"event_1","response_id":"resp_1","item_id":"item_1","output_index":0,"content_index":0,"delta":"` + strings.Repeat("QUFB", 320) + `"}`)

// flood writes n audio deltas, then waits for the client to close.
func flood(n int) func(ctx context.Context, c *websocket.Conn) {
	return func(ctx context.Context, c *websocket.Conn) {
		for i := 0; i < n; i++ {
			if c.Write(ctx, websocket.MessageText, audioDelta) != nil {
				return
			}
		}
		_, _, _ = c.Read(ctx)
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readN reads n messages from c.
func readN(b *testing.B, c *websocket.Conn, n int) {
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, _, err := c.Read(ctx); err != nil {
			b.Fatalf("message %d: %v", i, err)
		}
	}
}

// BenchmarkRelayMessage is the process's CPU per provider message
// relayed to the client: the provider's write, the relay's read,
// inspection and write, and the client's read. BenchmarkDirectMessage
// is the same without the relay; the difference is what the relay adds.
func BenchmarkRelayMessage(b *testing.B) {
	p := newPair(b, Limits{}, flood(b.N))
	c := p.dial(b)
	defer c.CloseNow()
	b.SetBytes(int64(len(audioDelta)))
	b.ResetTimer()
	cpu := cpuTime()
	readN(b, c, b.N)
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/msg")
}

func BenchmarkDirectMessage(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		flood(b.N)(r.Context(), c)
	}))
	defer up.Close()
	c, _, err := websocket.Dial(context.Background(), up.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 24)
	b.SetBytes(int64(len(audioDelta)))
	b.ResetTimer()
	cpu := cpuTime()
	readN(b, c, b.N)
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/msg")
}

// BenchmarkIdleSessions opens 1,000 idle sessions and reports the heap
// and stacks they hold. The figure counts both ends of both sockets of
// each session (the test's client and provider live in this process
// too), so the relay's own share is less.
func BenchmarkIdleSessions(b *testing.B) {
	const n = 1000
	for i := 0; i < b.N; i++ {
		p := newPair(b, Limits{}, func(ctx context.Context, c *websocket.Conn) {
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"session.created"}`))
			_, _, _ = c.Read(ctx)
		})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		conns := make([]*websocket.Conn, n)
		for j := range conns {
			conns[j] = p.dial(b)
			if _, _, err := conns[j].Read(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		used := float64(after.HeapInuse+after.StackInuse) - float64(before.HeapInuse+before.StackInuse)
		b.ReportMetric(used/(1<<20), "MB/1000-sessions")
		for _, c := range conns {
			c.CloseNow()
		}
	}
}

// BenchmarkIdleDirect is BenchmarkIdleSessions without the relay: 1,000
// client sockets straight to the provider. The difference between the
// two is what the relay's sessions hold.
func BenchmarkIdleDirect(b *testing.B) {
	const n = 1000
	for i := 0; i < b.N; i++ {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			_ = c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"session.created"}`))
			_, _, _ = c.Read(r.Context())
		}))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		conns := make([]*websocket.Conn, n)
		for j := range conns {
			c, _, err := websocket.Dial(context.Background(), up.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.Read(context.Background()); err != nil {
				b.Fatal(err)
			}
			conns[j] = c
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		used := float64(after.HeapInuse+after.StackInuse) - float64(before.HeapInuse+before.StackInuse)
		b.ReportMetric(used/(1<<20), "MB/1000-sessions")
		for _, c := range conns {
			c.CloseNow()
		}
		up.Close()
	}
}
