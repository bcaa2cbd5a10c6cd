package ratelimit

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Response headers, in canonical form so they are set without
// canonicalising on each request. Names and value formats are OpenAI's,
// which its SDKs and most clients already read.
const (
	hdrLimitRequests     = "X-Ratelimit-Limit-Requests"
	hdrLimitTokens       = "X-Ratelimit-Limit-Tokens"
	hdrRemainingRequests = "X-Ratelimit-Remaining-Requests"
	hdrRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	hdrResetRequests     = "X-Ratelimit-Reset-Requests"
	hdrResetTokens       = "X-Ratelimit-Reset-Tokens"
	hdrRetryAfter        = "Retry-After"
	hdrRetryAfterMS      = "Retry-After-Ms"
	hdrShouldRetry       = "X-Should-Retry"
)

// noRetryAfter is the wait above which a 429 tells SDKs not to retry
// (x-should-retry: false): the OpenAI SDKs otherwise retry twice within
// seconds, which cannot succeed when the budget is back only in minutes.
const noRetryAfter = time.Minute

// setHeaders writes the x-ratelimit-* headers of each policy type that
// matched, from the tightest policy of that type: the one with the fewest
// units remaining (the smaller limit on a tie), since that is the one the
// client will run into first.
func setHeaders(h http.Header, v *verdict) {
	var req, tok *grant
	pick := func(g *grant) {
		if g.policy.Type == policies.TypeCost {
			// The x-ratelimit-* headers count requests and tokens only.
			return
		}
		cur := &req
		if g.policy.Type == policies.TypeTokens {
			cur = &tok
		}
		if *cur == nil || tighter(g, *cur) {
			*cur = g
		}
	}
	for i := range v.grants {
		pick(&v.grants[i])
	}
	if v.refused != nil {
		pick(v.refused)
	}
	if req != nil {
		h[hdrLimitRequests] = []string{strconv.FormatInt(req.dec.Limit, 10)}
		h[hdrRemainingRequests] = []string{strconv.FormatInt(req.dec.Remaining, 10)}
		h[hdrResetRequests] = []string{formatReset(req.dec.ResetAfter)}
	}
	if tok != nil {
		h[hdrLimitTokens] = []string{strconv.FormatInt(tok.dec.Limit, 10)}
		h[hdrRemainingTokens] = []string{strconv.FormatInt(tok.dec.Remaining, 10)}
		h[hdrResetTokens] = []string{formatReset(tok.dec.ResetAfter)}
	}
}

// tighter reports whether a binds before b.
func tighter(a, b *grant) bool {
	if a.dec.Remaining != b.dec.Remaining {
		return a.dec.Remaining < b.dec.Remaining
	}
	return a.dec.Limit < b.dec.Limit
}

// setRetryHeaders writes the wait of a 429: Retry-After in whole seconds
// rounded up (never 0, which some clients read as "retry at once") and
// retry-after-ms, which the OpenAI SDKs prefer.
func setRetryHeaders(h http.Header, wait time.Duration) {
	secs := int64((wait + time.Second - 1) / time.Second)
	ms := int64((wait + time.Millisecond - 1) / time.Millisecond)
	h[hdrRetryAfter] = []string{strconv.FormatInt(max(secs, 1), 10)}
	h[hdrRetryAfterMS] = []string{strconv.FormatInt(max(ms, 1), 10)}
	if wait > noRetryAfter {
		h[hdrShouldRetry] = []string{"false"}
	}
}

// formatReset formats a reset delay as OpenAI does: Go duration syntax,
// milliseconds below a second ("250ms"), else rounded up to whole seconds
// ("1s", "6m0s", "1h0m0s"), so a client waiting that long finds the
// budget back.
func formatReset(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d <= time.Second-time.Millisecond:
		return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10) + "ms"
	}
	return ((d + time.Second - 1) / time.Second * time.Second).String()
}

// rejectMessage names the policy that refused (its name, else its id), its
// limit and when to retry, for the 429's error message.
func rejectMessage(p *policies.Policy, wait time.Duration) string {
	var b strings.Builder
	b.WriteString("Rate limit exceeded: policy ")
	if p.Name != nil && *p.Name != "" {
		b.WriteString(strconv.Quote(*p.Name))
		b.WriteString(" (")
		b.WriteString(p.ID)
		b.WriteString(")")
	} else {
		b.WriteString(p.ID)
	}
	b.WriteString(" allows ")
	if p.Type == policies.TypeCost {
		b.WriteString("US$")
		b.WriteString(strconv.FormatFloat(float64(p.Limit())/policies.MicroUSD, 'f', -1, 64))
	} else {
		b.WriteString(strconv.FormatInt(p.Limit(), 10))
		b.WriteByte(' ')
		b.WriteString(p.Type)
	}
	b.WriteString(" per ")
	b.WriteString(unitWord(p.Unit))
	b.WriteString(". Retry after ")
	b.WriteString(formatReset(wait))
	b.WriteByte('.')
	return b.String()
}

func unitWord(unit string) string {
	switch unit {
	case policies.UnitRPM:
		return "minute"
	case policies.UnitRPH:
		return "hour"
	case policies.UnitRPD:
		return "day"
	}
	return unit
}

// headerWriter sets the x-ratelimit-* headers again when the response
// starts. llm_gateway copies the provider's response headers onto the same
// map, and a provider such as OpenAI sends x-ratelimit-* of its own, which
// would otherwise replace the gateway's. Names the gateway does not set
// (the other type's, when only one type matched) pass through.
type headerWriter struct {
	*caddyhttp.ResponseWriterWrapper
	v       *verdict
	applied bool
}

func newHeaderWriter(w http.ResponseWriter, v *verdict) *headerWriter {
	return &headerWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, v: v}
}

func (w *headerWriter) apply() {
	if !w.applied {
		w.applied = true
		setHeaders(w.Header(), w.v)
	}
}

// WriteHeader implements http.ResponseWriter.
func (w *headerWriter) WriteHeader(code int) {
	if code >= 200 {
		w.apply()
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *headerWriter) Write(b []byte) (int, error) {
	w.apply()
	return w.ResponseWriterWrapper.Write(b)
}

// ReadFrom implements io.ReaderFrom, which would otherwise start the
// response on the wrapped writer without the headers.
func (w *headerWriter) ReadFrom(r io.Reader) (int64, error) {
	w.apply()
	return w.ResponseWriterWrapper.ReadFrom(r)
}

// FlushError lets http.ResponseController flush streamed answers, and
// starts the response with the headers if it has not started.
func (w *headerWriter) FlushError() error {
	w.apply()
	return http.NewResponseController(w.ResponseWriterWrapper.ResponseWriter).Flush()
}
