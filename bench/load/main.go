// Command load is the comparison benchmark's closed-loop load generator:
// a fixed number of clients send the same chat request back to back for
// a fixed time, and it prints one tab-separated line: requests per second,
// p50 and p99 latency, p50 time to first body byte (streams), errors, and
// the CPU time the target process spent per request, read from
// /proc/PID/stat before and after. Loopback targets only.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	target := flag.String("url", "", "target URL (loopback only)")
	conc := flag.Int("c", 16, "concurrent clients")
	dur := flag.Duration("d", 10*time.Second, "measured duration")
	warm := flag.Duration("warmup", 2*time.Second, "unmeasured warm-up")
	maxReq := flag.Int("n", 2_000_000, "cap on measured requests")
	stream := flag.Bool("stream", false, "ask for a stream")
	pid := flag.Int("pid", 0, "target process whose CPU time is charged per request")
	label := flag.String("label", "", "row label")
	var hdr headers
	flag.Var(&hdr, "H", "request header 'Name: value' (repeatable)")
	flag.Parse()
	if *dur > 10*time.Minute {
		fail(fmt.Errorf("duration %s is above the 10-minute bound", *dur))
	}
	u, err := url.Parse(*target)
	if err != nil || !net.ParseIP(u.Hostname()).IsLoopback() {
		fail(fmt.Errorf("%q is not a loopback URL", *target))
	}
	body := `{"model":"bench-model","max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Tell me a short story about a fox and a dog."}]`
	if *stream {
		body += `,"stream":true`
	}
	body += "}"
	h := http.Header{"Content-Type": {"application/json"}}
	for _, line := range hdr {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			fail(fmt.Errorf("header %q lacks a colon", line))
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}}

	var measuring atomic.Bool
	var stop atomic.Bool
	var count, errs atomic.Int64
	lat := make([][]time.Duration, *conc)
	ttfb := make([][]time.Duration, *conc)
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for !stop.Load() {
				t0 := time.Now()
				first, ok := one(client, *target, h, body, *stream)
				if !measuring.Load() {
					continue
				}
				if count.Add(1) > int64(*maxReq) {
					stop.Store(true)
				}
				if !ok {
					errs.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
				if *stream {
					ttfb[w] = append(ttfb[w], first.Sub(t0))
				}
			}
		}(w)
	}
	time.Sleep(*warm)
	cpu0 := cpuTicks(*pid)
	start := time.Now()
	measuring.Store(true)
	time.Sleep(*dur)
	stop.Store(true)
	elapsed := time.Since(start)
	cpu1 := cpuTicks(*pid)
	wg.Wait()

	all, firsts := flatten(lat), flatten(ttfb)
	n := len(all)
	rps := float64(n) / elapsed.Seconds()
	cpuMS := 0.0
	if *pid > 0 && n > 0 {
		cpuMS = float64(cpu1-cpu0) * 10 / float64(n) // 100 ticks per second
	}
	fmt.Printf("%s\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%.4f\n", *label, rps, ms(pct(all, 0.5)), ms(pct(all, 0.99)), ms(pct(firsts, 0.5)), errs.Load(), cpuMS)
}

// one sends a request and reads the whole answer; it returns when the
// first body byte arrived and whether the answer was a complete success.
func one(c *http.Client, target string, h http.Header, body string, stream bool) (time.Time, bool) {
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	req.Header = h.Clone()
	resp, err := c.Do(req)
	if err != nil {
		return time.Time{}, false
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	_, _ = br.Peek(1)
	first := time.Now()
	b, err := io.ReadAll(br)
	if err != nil || resp.StatusCode != http.StatusOK {
		return first, false
	}
	if stream {
		return first, bytes.Contains(b, []byte("[DONE]"))
	}
	return first, bytes.Contains(b, []byte(`"choices"`))
}

// cpuTicks returns utime+stime of pid and its waited-for children, in
// clock ticks, or 0 when pid is 0 or unreadable.
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime is field 14.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var total int64
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		total += v
	}
	return total
}

func flatten(in [][]time.Duration) []time.Duration {
	var out []time.Duration
	for _, s := range in {
		out = append(out, s...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}
