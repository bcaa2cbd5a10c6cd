package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// RespCost is the response header (without prefix) carrying a non-stream
// answer's cost in US dollars, when its model's price is known.
const RespCost = "cost"

var respCostKeys = [2]string{
	http.CanonicalHeaderKey(ingress.Prefix + RespCost), http.CanonicalHeaderKey(ingress.AliasPrefix + RespCost),
}

// attemptObs is one upstream attempt's trace span and timings.
type attemptObs struct {
	span  observe.AttemptSpan
	start time.Time
	// firstChunk is when a stream's first byte went to the client.
	firstChunk time.Time
}

// observeStart starts the attempt's CLIENT span (when the request is
// traced) and its clock. The returned context carries the span, so the
// traceparent injected into the upstream request names it.
func (e *executor) observeStart(ctx context.Context, call *providers.Call, u *providers.Upstream, t *routing.Target) (context.Context, attemptObs) {
	n := e.attempts
	e.attempts++
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, attemptObs{span: observe.AttemptSpan{}, start: time.Now()}
	}
	info := observe.AttemptInfo{
		Operation:    call.Op,
		Provider:     t.Settings.Provider,
		RequestModel: call.Model,
		Stream:       call.Stream,
		Attempt:      n,
		Target:       t.Path,
	}
	if u.URL != nil {
		info.ServerAddress = u.URL.Hostname()
		port, _ := strconv.Atoi(u.URL.Port())
		if port == 0 {
			port = 80
			if u.URL.Scheme == "https" {
				port = 443
			}
		}
		info.ServerPort = port
	}
	// Request parameters are read from the body the client sent (before
	// translation), which uses OpenAI's names.
	body := call.Body
	if v := gjson.GetBytes(body, "max_completion_tokens"); v.Type == gjson.Number {
		info.MaxTokens = v.Int()
	} else if v := gjson.GetBytes(body, "max_tokens"); v.Type == gjson.Number {
		info.MaxTokens = v.Int()
	} else if v := gjson.GetBytes(body, "max_output_tokens"); v.Type == gjson.Number {
		info.MaxTokens = v.Int()
	}
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		f := v.Float()
		info.Temperature = &f
	}
	if v := gjson.GetBytes(body, "top_p"); v.Type == gjson.Number {
		f := v.Float()
		info.TopP = &f
	}
	if v := gjson.GetBytes(body, "n"); v.Type == gjson.Number {
		info.ChoiceCount = int(v.Int())
	}
	if e.g.TraceContent {
		info.RecordContent = true
		for _, k := range []string{"messages", "input", "prompt"} {
			if v := gjson.GetBytes(body, k); v.Exists() {
				info.InputMessages = v.Raw
				break
			}
		}
	}
	ctx, span := observe.StartAttempt(ctx, info)
	return ctx, attemptObs{span: span, start: time.Now()}
}

// observeEnd ends the attempt's span and records its GenAI metrics: one
// operation duration per upstream call (with error.type when it failed)
// and, for streams, the time to the first chunk. Tokens and cost are
// recorded once per request from the log entry.
func (e *executor) observeEnd(o *attemptObs, call *providers.Call, t *routing.Target, out routing.Outcome) {
	res := resultOf(out)
	errType := attemptErrorType(out)
	var ttfc time.Duration
	if call.Stream && !o.firstChunk.IsZero() {
		ttfc = o.firstChunk.Sub(o.start)
	}
	observe.RecordGenAI(nil, &observe.GenAIRecord{
		Operation:        call.Op,
		Provider:         t.Settings.Provider,
		Model:            call.Model,
		Duration:         time.Since(o.start),
		TimeToFirstChunk: ttfc,
		ErrorType:        errType,
	})
	if !o.span.Recording() {
		return
	}
	r := observe.Result{StatusCode: out.Status, ErrorType: errType, TimeToFirstChunk: ttfc}
	if res != nil {
		r.Usage = res.usage
		if h := res.held; h != nil && errType == "" && !h.stream {
			body := h.body
			r.ResponseModel = gjson.GetBytes(body, "model").Str
			r.ResponseID = gjson.GetBytes(body, "id").Str
			for _, fr := range gjson.GetBytes(body, "choices.#.finish_reason").Array() {
				if fr.Str != "" {
					r.FinishReasons = append(r.FinishReasons, fr.Str)
				}
			}
			if e.g.TraceContent {
				if v := gjson.GetBytes(body, "choices.#.message"); v.Exists() {
					r.OutputMessages = v.Raw
				}
			}
		}
	}
	o.span.End(r)
}

// attemptErrorType is error.type for an attempt: empty on success, the
// provider's status code for its errors, else what went wrong.
func attemptErrorType(out routing.Outcome) string {
	switch out.Cause {
	case routing.CauseTimeout:
		return "timeout"
	case routing.CauseClientGone:
		return "canceled"
	case routing.CauseUnreachable:
		return "unreachable"
	case routing.CauseStreamFailed:
		return "stream_failed"
	}
	if out.Status >= 400 && out.Status <= 599 {
		return strconv.Itoa(out.Status)
	}
	if out.Status == 0 {
		return "_OTHER"
	}
	return ""
}

// price computes the request's cost from the usage its answer reported,
// for the log entry, the cost metric and the x-gateway-cost header (set
// on answers not yet sent that are not streams). An answer from the cache
// cost nothing; a model the catalog does not price has an unknown cost.
func (f *flight) price(c *cost.Catalog) {
	res := f.res
	if res == nil || res.usage == nil || res.target == nil {
		return
	}
	var usd float64
	known := true
	if !cache.IsHit(res.label) {
		model := res.model
		if model == "" && f.q != nil {
			model = f.q.Call.Model
		}
		usd, known = c.Cost(res.target.Settings.Provider, model, *res.usage)
	}
	f.costUSD, f.costKnown = usd, known
	if known && (f.q == nil || !f.q.Call.Stream) {
		f.out.cost = cost.FormatUSD(usd)
	}
}

// costHeader sets the cost header on h, under the alias prefix too when
// the client used it.
func (o *responder) costHeader(h map[string][]string) {
	if o.cost == "" {
		return
	}
	v := []string{o.cost}
	h[respCostKeys[0]] = v
	if o.alias {
		h[respCostKeys[1]] = v
	}
}
