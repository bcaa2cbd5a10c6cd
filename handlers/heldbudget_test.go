package handlers

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// heldBody is n bytes of a recognisable pattern, so a misplaced chunk
// shows.
func heldBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%23)
	}
	return b
}

// auditReader hands out body in reads of step bytes and, before each,
// checks that the capture has reserved at least every byte it holds.
type auditReader struct {
	t    *testing.T
	c    *capture
	body []byte
	step int
	peak int64 // the most the capture had reserved
}

func (r *auditReader) Read(p []byte) (int, error) {
	held := int64(r.c.buf.Cap()) + int64(len(r.c.chunks))*heldChunkSize
	if r.c.mode == modeHold && r.c.reserved < held {
		r.t.Errorf("capture holds %d bytes but reserved only %d", held, r.c.reserved)
	}
	r.peak = max(r.peak, r.c.reserved)
	if len(r.body) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.body)
	r.body = r.body[n:]
	return n, nil
}

// heldSend reads body through send into a held capture with budget,
// declaring its length or not.
func heldSend(t *testing.T, budget *app.HeldBudget, body []byte, declare bool, step int) (*capture, *httptest.ResponseRecorder, *auditReader, bool) {
	t.Helper()
	client := httptest.NewRecorder()
	c := testCapture(client, &providers.Call{Op: providers.OpChat})
	var total int64
	c.hold, c.validate, c.maxBody, c.budget, c.heldTotal = true, true, 64<<20, budget, &total
	h := http.Header{"Content-Type": {"application/json"}}
	length := int64(-1)
	if declare {
		length = int64(len(body))
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	r := &auditReader{t: t, c: c, body: body, step: step}
	req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
	err, aborted := testExecutor(zap.NewNop()).send(&fakeRT{res: answer(200, h, length, r)}, c, req)
	if err != nil {
		t.Fatal(err)
	}
	if total != c.reserved {
		t.Errorf("request's held total %d, capture reserved %d", total, c.reserved)
	}
	return c, client, r, aborted
}

// TestHeldAnswerExactBuffer: a held answer ends in one buffer of exactly
// its size, whatever its size, read size and declared length, and what
// stays reserved of the budget is that size; an answer of unknown length
// beyond the first MiB went through pooled chunks, all given back.
func TestHeldAnswerExactBuffer(t *testing.T) {
	for _, tt := range []struct {
		size, step int
		declare    bool
	}{
		{5000, 1000, false},
		{5000, 1000, true},
		{maxPrealloc, 32 << 10, false},
		{maxPrealloc + 1, 32 << 10, false},
		{3<<20 + 12345, 32 << 10, false},
		{3<<20 + 12345, 7777, false},
		{3<<20 + 12345, 200 << 10, false},
		{3 * heldChunkSize * 8, heldChunkSize, false},
		{3<<20 + 12345, 32 << 10, true},
	} {
		t.Run(strconv.Itoa(tt.size)+"/"+strconv.Itoa(tt.step)+"/"+strconv.FormatBool(tt.declare), func(t *testing.T) {
			body := heldBody(tt.size)
			budget := app.NewHeldBudget(64 << 20)
			c, _, r, aborted := heldSend(t, budget, body, tt.declare, tt.step)
			if aborted || c.mode != modeHold || c.committed {
				t.Fatalf("aborted %v mode %v committed %v", aborted, c.mode, c.committed)
			}
			if !bytes.Equal(c.buf.Bytes(), body) {
				t.Fatalf("held %d bytes differ from the %d sent", c.buf.Len(), len(body))
			}
			if c.buf.Cap() != tt.size && tt.size > maxPrealloc {
				t.Errorf("held buffer capacity %d for %d bytes, want exact", c.buf.Cap(), tt.size)
			}
			if len(c.chunks) != 0 || c.chunked != 0 {
				t.Errorf("%d chunks kept after the join", len(c.chunks))
			}
			if got := budget.InUse(); got != int64(c.buf.Cap()) || got != c.reserved {
				t.Errorf("budget in use %d, capture reserved %d, buffer %d", got, c.reserved, c.buf.Cap())
			}
			t.Logf("peak reservation %d for %d bytes", r.peak, tt.size)
		})
	}
}

// TestHeldAnswerJoinOverBudget: when the budget has room for the chunks
// but not for joining them, an answer held only to be checked passes
// through whole, checked; one that must be held is refused. Either way
// nothing stays reserved.
func TestHeldAnswerJoinOverBudget(t *testing.T) {
	const size = 3 << 20
	body := []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		string(bytes.Repeat([]byte("z"), size)) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	for _, mustHold := range []bool{false, true} {
		t.Run("mustHold "+strconv.FormatBool(mustHold), func(t *testing.T) {
			// The first MiB and the chunks fit; another copy does not.
			budget := app.NewHeldBudget(int64(len(body)) + 2<<20)
			client := httptest.NewRecorder()
			c := testCapture(client, &providers.Call{Op: providers.OpChat})
			c.hold, c.validate, c.mustHold, c.maxBody, c.budget = true, true, mustHold, 64<<20, budget
			r := &auditReader{t: t, c: c, body: body, step: 32 << 10}
			req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
			h := http.Header{"Content-Type": {"application/json"}}
			err, aborted := testExecutor(zap.NewNop()).send(&fakeRT{res: answer(200, h, -1, r)}, c, req)
			if err != nil {
				t.Fatal(err)
			}
			if r.peak <= int64(len(body)) {
				t.Fatalf("the chunks never filled the budget (peak %d)", r.peak)
			}
			if mustHold {
				if !aborted || !c.overBudget || c.committed || client.Body.Len() != 0 {
					t.Fatalf("aborted %v overBudget %v committed %v, %d bytes sent", aborted, c.overBudget, c.committed, client.Body.Len())
				}
			} else {
				if aborted || !c.committed || c.check == nil || !bytes.Equal(client.Body.Bytes(), body) {
					t.Fatalf("aborted %v committed %v, %d of %d bytes sent", aborted, c.committed, client.Body.Len(), len(body))
				}
				if err := c.finish(); err != nil || c.usage == nil || c.usage.CompletionTokens != 2 {
					t.Fatalf("check of the passed-through answer: %v, usage %+v", err, c.usage)
				}
			}
			if budget.InUse() != 0 || c.reserved != 0 || len(c.chunks) != 0 {
				t.Fatalf("budget in use %d, reserved %d, %d chunks", budget.InUse(), c.reserved, len(c.chunks))
			}
		})
	}
}

// TestHeldAnswerCutShortGivesBack: a held answer whose body breaks off
// gives its chunks and its reservation back at once.
func TestHeldAnswerCutShortGivesBack(t *testing.T) {
	budget := app.NewHeldBudget(64 << 20)
	c := testCapture(httptest.NewRecorder(), &providers.Call{Op: providers.OpChat})
	c.hold, c.maxBody, c.budget = true, 64<<20, budget
	body := &chunks{parts: []string{string(heldBody(1 << 20)), string(heldBody(1 << 20))}, end: io.ErrUnexpectedEOF}
	req := httptest.NewRequest(http.MethodPost, "http://provider.test/v1/chat/completions", nil)
	h := http.Header{"Content-Type": {"application/json"}}
	if _, aborted := testExecutor(zap.NewNop()).send(&fakeRT{res: answer(200, h, -1, body)}, c, req); !aborted {
		t.Fatal("a broken body must be an abort")
	}
	if budget.InUse() != 0 || len(c.chunks) != 0 || c.buf.Cap() != 0 {
		t.Fatalf("budget in use %d, %d chunks, buffer %d after the abort", budget.InUse(), len(c.chunks), c.buf.Cap())
	}
}

// TestHeldAnswerAllocations: reading a held answer of unknown length
// allocates about its size once (the first MiB's doubling buffer and the
// exact one; the chunks come from the pool), where doubling to the end
// allocated about twice its size. Measured with TotalAlloc around one
// send after a warm-up, so the pool has its chunks.
func TestHeldAnswerAllocations(t *testing.T) {
	const size = 8 << 20
	body := heldBody(size)
	read := func() {
		c, _, _, aborted := heldSend(t, nil, body, false, 32<<10)
		if aborted || c.buf.Len() != size {
			t.Fatalf("aborted %v, %d bytes held", aborted, c.buf.Len())
		}
	}
	read()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	read()
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d MiB answer of unknown length: %.2f MiB allocated", size>>20, float64(alloc)/(1<<20))
	if limit := uint64(size + 4<<20); alloc > limit {
		t.Fatalf("%d bytes allocated for a %d-byte answer, want at most %d", alloc, size, limit)
	}
}
