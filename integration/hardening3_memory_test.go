package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// bigChatAnswer is a chat completion of about size bytes; with cut, its
// middle holds a byte no JSON may hold; with noChoices, it is valid JSON
// without the choices every client reads.
func bigChatAnswer(size int, cut, noChoices bool) []byte {
	head := `{"id":"chatcmpl-big","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"`
	if noChoices {
		head = `{"id":"chatcmpl-big","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","pad":[{"index":0,"message":{"role":"assistant","content":"`
	}
	tail := `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":777,"total_tokens":786}}`
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("abcdefgh"), (size-len(head)-len(tail))/8)...)
	if cut {
		b[len(b)/2] = 0x01 // a control character inside a string
	}
	return append(b, tail...)
}

// serveBody answers with body, declaring its length or sending it
// chunked, in 64 KiB writes.
func serveBody(w http.ResponseWriter, body []byte, declare bool) {
	w.Header().Set("Content-Type", "application/json")
	if declare {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	for len(body) > 0 {
		n := min(len(body), 64<<10)
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		body = body[n:]
	}
}

// readAll sends a chat request and reads the answer without holding it:
// its length, head and tail, and the read error.
func readAllChat(t *testing.T, config string) (status int, n int64, head, tail []byte, err error) {
	t.Helper()
	req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("x-gateway-api-key", gatewayKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-gateway-config", compactJSON(t, config))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 256<<10)
	for {
		k, rerr := resp.Body.Read(buf)
		if n == 0 && k > 0 {
			head = append([]byte(nil), buf[:min(k, 512)]...)
		}
		if k > 0 {
			tail = append(tail[:0], buf[max(0, k-512):k]...)
		}
		n += int64(k)
		if rerr == io.EOF {
			return resp.StatusCode, n, head, tail, nil
		}
		if rerr != nil {
			return resp.StatusCode, n, head, tail, rerr
		}
	}
}

// TestHardening3HeldAnswerMemory: a 50 MB answer held for its integrity
// check costs about its size, not 3.3 times it: the gateway's
// allocations while serving it (runtime.MemStats.TotalAlloc; the fake
// provider's body and the client's reads are allocated outside it) stay
// below its size plus 16 MiB, with a declared length (one exact buffer)
// and without one (pooled chunks joined into one exact buffer; doubling
// to the end allocated 2.6 times its size).
func TestHardening3HeldAnswerMemory(t *testing.T) {
	const size = 50 << 20
	body := bigChatAnswer(size, false, false)
	for _, declare := range []bool{true, false} {
		t.Run(fmt.Sprintf("content-length %v", declare), func(t *testing.T) {
			up := newFakeOpenAI(t)
			up.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
				serveBody(w, body, declare)
				return true
			}
			loadFresh(t, site{})
			// A first request warms pools and connections.
			readAllChat(t, target(up, ""))
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			status, n, _, tail, err := readAllChat(t, target(up, ""))
			runtime.ReadMemStats(&after)
			if err != nil || status != 200 || n != int64(len(body)) || !bytes.HasSuffix(body, tail) {
				t.Fatalf("status %d, %d of %d bytes, err %v", status, n, len(body), err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("a %d MB held answer (declared length %v): %.1f MB allocated while serving it (%.2fx)", size>>20, declare, float64(alloc)/(1<<20), float64(alloc)/size)
			// Its size plus the first MiB (and, without a declared
			// length, the chunk list; the chunks are the pool's).
			if limit := uint64(size + 16<<20); alloc > limit {
				t.Fatalf("%d MB allocated for a %d MB answer, want at most %d MB", alloc>>20, size>>20, limit>>20)
			}
		})
	}
}

// TestHardening3HeldBudget: beyond max_held_bytes, an answer held only
// to be checked passes through unheld, checked as it streams: a valid
// one arrives whole with its usage logged; a malformed one breaks the
// connection instead of ending cleanly. An answer that must be held (a
// translated provider's) is a 503 naming the limit. The budget is given
// back: a small malformed answer is held (and is a 502) afterwards.
func TestHardening3HeldBudget(t *testing.T) {
	const size = 4 << 20
	good := bigChatAnswer(size, false, false)
	cut := bigChatAnswer(size, true, false)
	noChoices := bigChatAnswer(size, false, true)
	var mu sync.Mutex
	var answer []byte
	var declare bool
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		mu.Lock()
		b, d := answer, declare
		mu.Unlock()
		serveBody(w, b, d)
		return true
	}
	set := func(b []byte, d bool) {
		mu.Lock()
		answer, declare = b, d
		mu.Unlock()
	}
	loadFresh(t, site{LLM: "max_held_bytes 1MiB"})
	for _, tt := range []struct {
		name    string
		body    []byte
		declare bool
		ok      bool
	}{
		{"valid, declared length", good, true, true},
		{"valid, chunked", good, false, true},
		{"invalid byte, declared length", cut, true, false},
		{"invalid byte, chunked", cut, false, false},
		{"no choices, declared length", noChoices, true, false},
		{"no choices, chunked", noChoices, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set(tt.body, tt.declare)
			truncateLog()
			status, n, _, tail, err := readAllChat(t, target(up, ""))
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			if tt.ok {
				if err != nil || n != int64(len(tt.body)) || !bytes.HasSuffix(tt.body, tail) {
					t.Fatalf("%d of %d bytes, err %v", n, len(tt.body), err)
				}
				line := gatewayLogLines(t)
				if len(line) == 0 || gjson.Get(line[len(line)-1], "usage.completion_tokens").Int() != 777 {
					t.Fatalf("usage of the passed-through answer not logged: %v", line)
				}
				return
			}
			if err == nil {
				t.Fatalf("a malformed answer passed through unheld ended cleanly (%d bytes)", n)
			}
			if n > int64(len(tt.body)) {
				t.Fatalf("%d bytes sent", n)
			}
		})
	}

	t.Run("must be held: translated answer is a 503", func(t *testing.T) {
		text := strings.Repeat("x", 2<<20)
		anth := newFakeServer(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			writeJSON(w, 200, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"`+text+`"}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":3}}`))
		})
		resp, raw := chat(t, fmt.Sprintf(`{"provider":"anthropic","api_key":%q,"custom_host":%q}`, anthropicKey, anth.URL))
		if resp.StatusCode != http.StatusServiceUnavailable || gjson.GetBytes(raw, "error.code").String() != "held_budget_exceeded" ||
			!strings.Contains(string(raw), "1048576 bytes") {
			t.Fatalf("status %d body %.300s", resp.StatusCode, raw)
		}
	})

	t.Run("the budget is given back", func(t *testing.T) {
		set([]byte(`{"id":"x","object":"chat.completion"}`), true)
		resp, raw := chat(t, target(up, ""))
		if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(raw, "error.code").String() != "invalid_upstream_response" {
			t.Fatalf("a small malformed answer was not held: status %d body %s", resp.StatusCode, raw)
		}
	})
}

// TestHardening3ReplayLimit: previous_response_id replays at most the
// documented 8 MiB of stored items. A 30 MB stored turn (one answer of a
// translated target) is then a 400 naming the limit for each of four
// 5-byte requests continuing it, and no provider is called for them.
func TestHardening3ReplayLimit(t *testing.T) {
	text := strings.Repeat("y", 30<<20)
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, text)
		return true
	}
	loadFresh(t, site{})
	hdr := []string{"x-gateway-provider", "together-ai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-test-provider"}
	resp, raw := do(t, "POST", "/responses", []byte(`{"model":"m","input":"hi"}`), hdr...)
	id := gjson.GetBytes(raw, "id").String()
	if resp.StatusCode != 200 || !strings.HasPrefix(id, "resp_") {
		t.Fatalf("first turn: status %d body %.300s", resp.StatusCode, raw)
	}
	calls := up.count()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, raw := do(t, "POST", "/responses", []byte(`{"model":"m","input":"again","previous_response_id":"`+id+`"}`), hdr...)
			if resp.StatusCode != 400 || gjson.GetBytes(raw, "error.code").String() != "replay_too_large" ||
				gjson.GetBytes(raw, "error.param").String() != "previous_response_id" || !strings.Contains(string(raw), "8388608 bytes") || len(raw) > 1000 {
				t.Errorf("status %d body %.300s", resp.StatusCode, raw)
			}
		}()
	}
	wg.Wait()
	if up.count() != calls {
		t.Fatalf("%d provider calls for replays beyond the limit", up.count()-calls)
	}
}
