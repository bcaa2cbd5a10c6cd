package handlers

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// captureMode is what a capture does with the upstream response, decided
// when its status arrives.
type captureMode uint8

const (
	// The zero value: no status yet.
	_ captureMode = iota
	// modePass streams the response to the client as it arrives.
	modePass
	// modeBuffer holds an error response that may be retried or replaced
	// by a fallback; it is written only if it turns out to be final.
	modeBuffer
	// modeHold buffers a successful response whole: to translate it, or to
	// enforce a timeout on its body before anything reaches the client.
	modeHold
	// modeConvert feeds a successful stream to a provider's converter,
	// which writes OpenAI chunks to the client.
	modeConvert
)

// errResponseTooLarge stops send copying an answer larger than
// max_response_body into a held buffer.
var errResponseTooLarge = errors.New("response exceeds max_response_body")

// maxErrorBody bounds how much of an error response is kept in memory.
const maxErrorBody = 1 << 20

// capture is the ResponseWriter send copies one attempt's answer into.
// It has its own header map, so nothing a failed attempt set can leak into
// the response of a later one; headers reach the client only on commit.
type capture struct {
	client http.ResponseWriter
	call   *providers.Call
	tr     providers.Translator
	hold   bool // buffer successes too (non-stream with a deadline)
	// validate holds a 2xx non-stream answer of an inference endpoint
	// from an untranslated (OpenAI-format) provider so it is checked
	// before the client has any of it.
	validate bool
	// maxBody bounds a held success; tooLarge records that it was
	// exceeded and the answer dropped.
	maxBody  int64
	tooLarge bool
	// budget is the process-wide bound on held bytes (heldbudget.go);
	// reserved is what this capture took of it, also counted in
	// heldTotal, the request's, which is released when the request
	// ends. mustHold says the answer cannot pass through unheld (it is
	// translated, judged or wrapped): beyond the budget it is refused
	// (overBudget); any other held answer passes through instead, checked
	// as it streams by check.
	budget     *app.HeldBudget
	reserved   int64
	heldTotal  *int64
	mustHold   bool
	overBudget bool
	check      *shapeStream
	// declared is the upstream's Content-Length of a held answer (0 when
	// unknown): the buffer grows to it exactly, once bytes arrive.
	// bufFunded is what buf's allocation has reserved of the budget
	// besides the declared length (given back when it is outgrown).
	declared  int64
	bufFunded int64
	// chunks hold a held answer beyond its first MiB when its length is
	// unknown: pooled, fixed-size, joined into one exact buf when the
	// body ended (heldbudget.go); chunked is the bytes in them.
	chunks  []*heldChunk
	chunked int
	// storeMax bounds the stream transcript kept for store; a longer
	// one is not handed over.
	storeMax int
	// store, when set, receives a successful answer for its sink just
	// before its last bytes reach the client, so the client's next
	// identical request finds it: a held body before it is written, a
	// stream's SSE transcript before its data: [DONE].
	store  func(body []byte, stream bool)
	stored bool

	header http.Header
	status int
	mode   captureMode
	buf    bytes.Buffer
	sse    *sseFilter
	conv   providers.StreamConverter
	usage  *providers.Usage
	// partialUsage says usage is not the provider's final count
	// (streamUsage).
	partialUsage bool
	// tee copies a passed-through JSON body (for usage), or a stream's
	// OpenAI events when store is set; teeFull says it outgrew teeMax and
	// is incomplete.
	tee     *bytes.Buffer
	teeMax  int
	teeFull bool
	onStart func() // called when the first byte is committed
	// firstByte is when the first byte of the answer's body arrived.
	firstByte time.Time
	commit    func(status int, h http.Header)

	committed bool
	wrote     bool
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status != 0 || status < 200 {
		return
	}
	c.status = status
	switch {
	case status < 200 || status >= 300:
		c.mode = modeBuffer
	case c.tr != nil && c.call.Stream:
		c.mode = modeConvert
		h := c.header
		h.Del("Content-Length")
		h.Del("Content-Encoding")
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		c.doCommit()
		fw := flushWriter{w: c.client}
		if c.store != nil {
			c.startTee(c.storeMax)
			fw.tee = c
		}
		c.conv = c.tr.Stream(c.call, fw)
	case c.tr != nil || c.hold || c.validate:
		c.mode = modeHold
		// A declared length beyond the cap is refused before any byte
		// is held; one within it is taken from the budget at once.
		if cl := c.header.Get("Content-Length"); cl != "" {
			if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n > c.maxBody {
				c.tooLarge = true
			} else if err == nil && n > 0 {
				c.declared = n
				if !c.reserve(n) {
					// Nothing is held yet: this cannot fail.
					_ = c.overflow()
				}
			}
		}
	default:
		c.mode = modePass
		if c.call.Stream && isEventStream(c.header) {
			c.sse = &sseFilter{w: c.client, dropUsage: c.call.UsageAdded}
			c.header.Del("Content-Length")
			if c.store != nil {
				// The upstream's events, before the usage chunk the
				// client did not ask for is dropped: the stored answer
				// keeps its usage.
				c.startTee(c.storeMax)
				c.sse.onDone = c.storeStream
			}
		} else if c.call.Op != providers.OpProxy && isJSON(c.header) {
			c.startTee(maxErrorBody)
		}
		c.doCommit()
	}
}

func (c *capture) startTee(limit int) {
	c.tee, c.teeMax = new(bytes.Buffer), limit
}

// storeStream hands the complete stream transcript to store, once.
func (c *capture) storeStream() {
	if c.stored || c.teeFull {
		return
	}
	c.stored = true
	c.store(c.tee.Bytes(), true)
}

// teeWrite copies p into the tee, or marks it incomplete.
func (c *capture) teeWrite(p []byte) {
	if c.teeFull {
		return
	}
	if c.tee.Len()+len(p) > c.teeMax {
		c.teeFull = true
		return
	}
	c.tee.Write(p)
}

func (c *capture) doCommit() {
	c.committed = true
	if c.onStart != nil {
		c.onStart()
	}
	c.commit(c.status, c.header)
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.firstByte.IsZero() {
		c.firstByte = time.Now()
	}
	switch c.mode {
	case modeBuffer:
		if c.buf.Len() < maxErrorBody {
			c.buf.Write(p[:min(len(p), maxErrorBody-c.buf.Len())])
		}
		return len(p), nil
	case modeHold:
		if c.overBudget {
			return 0, errHeldBudget
		}
		need := c.buf.Len() + c.chunked + len(p)
		if c.tooLarge || int64(need) > c.maxBody {
			// Stop reading: send aborts the upstream body, and
			// the memory goes back at once.
			c.tooLarge = true
			c.dropHeld()
			return 0, errResponseTooLarge
		}
		if c.chunking(need) {
			return c.writeChunks(p)
		}
		if need > c.buf.Cap() {
			if !c.grow(need) {
				if err := c.overflow(); err != nil {
					return 0, err
				}
				return c.Write(p)
			}
		}
		return c.buf.Write(p)
	case modeConvert:
		c.wrote = true
		return c.conv.Write(p)
	}
	c.wrote = true
	if c.check != nil {
		if _, err := c.check.Write(p); err != nil {
			// Not one byte of the invalid part reaches the client:
			// send stops, and the connection is broken.
			return 0, err
		}
	}
	if c.tee != nil {
		c.teeWrite(p)
	}
	if c.sse != nil {
		return c.sse.Write(p)
	}
	return c.client.Write(p)
}

// FlushError lets send flush each SSE event to the client.
func (c *capture) FlushError() error {
	if !c.committed || c.mode == modeBuffer || c.mode == modeHold {
		return nil
	}
	return flushClient(c.client)
}

// Unwrap lets http.ResponseController reach the client's writer.
func (c *capture) Unwrap() http.ResponseWriter { return c.client }

// finish is called after the upstream body ended cleanly.
func (c *capture) finish() error {
	switch {
	case c.conv != nil:
		err := c.conv.Close()
		c.usage, c.partialUsage = c.streamUsage()
		_ = flushClient(c.client)
		return err
	case c.sse != nil:
		err := c.sse.Flush()
		c.usage = c.sse.usage
		return err
	case c.check != nil:
		usage, err := c.check.Close()
		c.usage = usage
		return err
	case c.tee != nil && !c.teeFull:
		c.usage = usageFromBody(c.tee.Bytes())
	}
	return nil
}

// usageFinality is implemented by stream converters whose usage may be
// counted before the provider's final report: Anthropic's message_start
// gives the input and one output token, message_delta the final counts.
type usageFinality interface {
	// UsageFinal reports whether Usage is the final count.
	UsageFinal() bool
}

// streamUsage is the usage a streamed answer reported so far, and
// whether it is partial: a converter's that is not yet final. An
// OpenAI-format stream reports usage once, in its last chunk, so what
// it reported is final.
func (c *capture) streamUsage() (u *providers.Usage, partial bool) {
	switch {
	case c.conv != nil:
		u = c.conv.Usage()
		if f, ok := c.conv.(usageFinality); ok && u != nil {
			partial = !f.UsageFinal()
		}
		return u, partial
	case c.sse != nil:
		return c.sse.usage, false
	}
	return c.usage, c.partialUsage
}

// flushWriter flushes each write through to the client, so a converted
// stream's events are not held back; tee, when set, gets a copy and
// stores the stream when its end is about to be written.
type flushWriter struct {
	w   http.ResponseWriter
	tee *capture
}

func (f flushWriter) Write(p []byte) (int, error) {
	if t := f.tee; t != nil {
		t.teeWrite(p)
		if !t.stored && !t.teeFull {
			// An end marker may begin in an earlier write (a provider
			// read cut it): look at p and the bytes before it that the
			// longer marker could span.
			b := t.tee.Bytes()
			b = b[max(0, len(b)-len(p)-len(messageStopEvent)+1):]
			if bytes.Contains(b, sseDoneEvent) || bytes.Contains(b, messageStopEvent) {
				t.storeStream()
			}
		}
	}
	n, err := f.w.Write(p)
	if err == nil {
		err = flushClient(f.w)
	}
	return n, err
}

var _ io.Writer = flushWriter{}

func flushClient(w http.ResponseWriter) error {
	err := http.NewResponseController(w).Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= 17 && ct[:17] == "text/event-stream"
}

func isJSON(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= 16 && ct[:16] == "application/json"
}
