// Package observe records what happened to each request: one structured log
// entry per request (with every attempt), and the Prometheus metrics
// derived from it. Nothing here ever holds a secret: entries carry names
// (the gateway key's name, the provider slug), never keys.
package observe

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Entry is the log record filled as a request passes through the gateway
// and written once at the end.
type Entry struct {
	TraceID   string
	KeyName   string
	Workspace string
	// Organisation is the gateway key's organisation id.
	Organisation string
	// VirtualKey is the name of the virtual key the client used, if any.
	VirtualKey string
	Operation  providers.Operation
	Method     string
	Path       string
	Provider   string
	Model      string
	ConfigID   string
	Status     int
	Stream     bool
	CacheState string
	Start      time.Time
	// FirstByte is when the first response byte went to the client.
	FirstByte time.Time
	Usage     *providers.Usage
	// CostUSD is what Usage cost in US dollars when CostKnown; with Usage
	// set and CostKnown false the model has no known price.
	CostUSD   float64
	CostKnown bool
	Metadata  map[string]string
	Attempts  []Attempt
	// Error is the gateway's own error message, if it produced one.
	Error string
	// Refusal is why the gateway itself refused the request (one of
	// RefusalReasons), "" when it did not: counted once, when the entry
	// is recorded, in llm_gateway_refusals_total. It is not logged (the
	// status and error say it).
	Refusal string
	// ErrorType is the class of the provider's error answer the client
	// got (providers.ErrorClass: context_length_exceeded, rate_limited,
	// …), empty when it has none.
	ErrorType string
	// BatchID and CustomID name the managed batch line the request ran
	// (empty for other requests): the ledger keeps one record per line.
	BatchID, CustomID string
	// ChargeDuplicate marks a run of a batch line that another run of
	// the same line already charged (a line re-run after another instance
	// took the batch over): it is charged nothing, its reservations are
	// released, and the ledger does not record it.
	ChargeDuplicate bool
	// UsageEstimated marks Usage and the cost as the gateway's estimate
	// rather than the provider's report: a stream that ended (the client
	// cancelled, the provider broke off) before its usage arrived.
	UsageEstimated bool
	// Extra carries fields added by other parts of the pipeline (prompt id,
	// guardrail verdicts) without this package knowing them.
	Extra []zap.Field

	// loggedAt is when Log handed the entry to the access log, which
	// encodes it later, as of then.
	loggedAt time.Time
}

// Attempt is one upstream call of a request.
type Attempt struct {
	Target   string // JSON path of the leaf target, e.g. config.targets[1]
	Provider string
	Status   int
	Duration time.Duration
	// Outcome says why the gateway moved on, or "ok".
	Outcome string
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (a Attempt) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("target", a.Target)
	enc.AddString("provider", a.Provider)
	enc.AddInt("status", a.Status)
	enc.AddFloat64("duration_ms", float64(a.Duration.Microseconds())/1000)
	enc.AddString("outcome", a.Outcome)
	return nil
}

// attemptsLog logs an entry's attempts. It is the entry itself, so that
// handing it to an encoder as an interface allocates nothing (a slice
// would be copied to the heap); each attempt is handed on by pointer for
// the same reason.
type attemptsLog Entry

func (l *attemptsLog) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for i := range l.Attempts {
		if err := enc.AppendObject(&l.Attempts[i]); err != nil {
			return err
		}
	}
	return nil
}

type usageLog struct{ *providers.Usage }

func (u usageLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt64("prompt_tokens", u.PromptTokens)
	enc.AddInt64("completion_tokens", u.CompletionTokens)
	enc.AddInt64("total_tokens", u.TotalTokens)
	if u.CachedTokens > 0 {
		enc.AddInt64("cached_tokens", u.CachedTokens)
	}
	if u.CacheWriteTokens > 0 {
		enc.AddInt64("cache_write_tokens", u.CacheWriteTokens)
	}
	if u.ReasoningTokens > 0 {
		enc.AddInt64("reasoning_tokens", u.ReasoningTokens)
	}
	return nil
}

type metadataLog map[string]string

func (m metadataLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for k, v := range m {
		enc.AddString(k, v)
	}
	return nil
}

// Log records the entry in the metrics and logs it exactly once: as an
// "llm" object inside Caddy's access log entry for r when the site logs r
// (through caddyhttp.ExtraLogFields, so one line carries both), else as
// the gateway's own "llm request" entry at info level (warn for 5xx).
func (e *Entry) Log(r *http.Request, logger *zap.Logger) {
	now := time.Now()
	e.record(now)
	if extra := AccessLogFields(r); extra != nil {
		extra.Add(e.accessField(now))
		return
	}
	e.write(logger, now)
}

// Write records the entry in the metrics and emits it as the gateway's
// own entry, whether or not the site logs. Callers serving HTTP use Log.
func (e *Entry) Write(logger *zap.Logger) {
	now := time.Now()
	e.record(now)
	e.write(logger, now)
}

func (e *Entry) write(logger *zap.Logger, now time.Time) {
	lvl := zapcore.InfoLevel
	if e.Status >= 500 {
		lvl = zapcore.WarnLevel
	}
	ce := logger.Check(lvl, "llm request")
	if ce == nil {
		return
	}
	enc := fieldsEncoder{fields: make([]zap.Field, 0, 20+len(e.Extra))}
	e.encode(&enc, now)
	ce.Write(append(enc.fields, e.Extra...)...)
}

// accessField is the entry as the access log's "llm" object, logged at
// now. The object is the entry itself (with now kept in it), so the field
// costs no allocation.
func (e *Entry) accessField(now time.Time) zap.Field {
	e.loggedAt = now
	return zap.Object("llm", (*entryLog)(e))
}

// entryLog marshals an entry as one object, for the access log, as of
// its loggedAt.
type entryLog Entry

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (l *entryLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	e := (*Entry)(l)
	e.encode(enc, e.loggedAt)
	for _, f := range e.Extra {
		f.AddTo(enc)
	}
	return nil
}

// entryEncoder is what encode writes an entry's own fields to: the
// object encoder of the access log's llm object (any
// zapcore.ObjectEncoder is one), or fieldsEncoder for the gateway's own
// entry. Writing through these methods, rather than building a zap.Field
// per field, keeps the access log path free of Field values and of
// Field.AddTo's type switch; one list of fields serves both paths.
type entryEncoder interface {
	AddString(key, value string)
	AddInt(key string, value int)
	AddBool(key string, value bool)
	AddFloat64(key string, value float64)
	AddObject(key string, m zapcore.ObjectMarshaler) error
	AddArray(key string, a zapcore.ArrayMarshaler) error
}

// fieldsEncoder collects an entry's fields, for the gateway's own entry.
type fieldsEncoder struct{ fields []zap.Field }

func (f *fieldsEncoder) AddString(k, v string)    { f.fields = append(f.fields, zap.String(k, v)) }
func (f *fieldsEncoder) AddInt(k string, v int)   { f.fields = append(f.fields, zap.Int(k, v)) }
func (f *fieldsEncoder) AddBool(k string, v bool) { f.fields = append(f.fields, zap.Bool(k, v)) }
func (f *fieldsEncoder) AddFloat64(k string, v float64) {
	f.fields = append(f.fields, zap.Float64(k, v))
}

func (f *fieldsEncoder) AddObject(k string, m zapcore.ObjectMarshaler) error {
	f.fields = append(f.fields, zap.Object(k, m))
	return nil
}

func (f *fieldsEncoder) AddArray(k string, a zapcore.ArrayMarshaler) error {
	f.fields = append(f.fields, zap.Array(k, a))
	return nil
}

// encode writes the entry's own fields (not Extra) as of now. The
// optional ones are left out when empty.
func (e *Entry) encode(out entryEncoder, now time.Time) {
	out.AddString("trace_id", e.TraceID)
	out.AddString("api_key_name", e.KeyName)
	out.AddString("workspace_id", e.Workspace)
	out.AddString("endpoint", string(e.Operation))
	out.AddString("method", e.Method)
	out.AddString("path", e.Path)
	out.AddString("provider", e.Provider)
	out.AddString("model", e.Model)
	out.AddInt("status", e.Status)
	out.AddBool("stream", e.Stream)
	out.AddFloat64("duration_ms", float64(now.Sub(e.Start).Microseconds())/1000)
	if !e.FirstByte.IsZero() {
		out.AddFloat64("ttfb_ms", float64(e.FirstByte.Sub(e.Start).Microseconds())/1000)
	}
	if e.VirtualKey != "" {
		out.AddString("virtual_key", e.VirtualKey)
	}
	if e.ConfigID != "" {
		out.AddString("config_id", e.ConfigID)
	}
	if e.CacheState != "" {
		out.AddString("cache_status", e.CacheState)
	}
	if e.Usage != nil {
		addObject(out, "usage", usageLog{e.Usage})
		if e.CostKnown {
			out.AddFloat64("cost_usd", e.CostUSD)
		} else {
			out.AddBool("cost_unknown", true)
		}
		if e.UsageEstimated {
			out.AddBool("usage_estimated", true)
		}
	}
	if e.BatchID != "" {
		out.AddString("batch_id", e.BatchID)
		out.AddString("custom_id", e.CustomID)
		if e.ChargeDuplicate {
			out.AddBool("charge_duplicate", true)
		}
	}
	if len(e.Metadata) > 0 {
		addObject(out, "metadata", metadataLog(e.Metadata))
	}
	if len(e.Attempts) > 0 {
		if err := out.AddArray("attempts", (*attemptsLog)(e)); err != nil {
			out.AddString("attemptsError", err.Error())
		}
	}
	if e.Error != "" {
		out.AddString("error", e.Error)
	}
	if e.ErrorType != "" {
		out.AddString("error_type", e.ErrorType)
	}
}

// addObject adds an object and, as zap.Object's field does, the error
// marshaling it returned under key+"Error".
func addObject(out entryEncoder, key string, m zapcore.ObjectMarshaler) {
	if err := out.AddObject(key, m); err != nil {
		out.AddString(key+"Error", err.Error())
	}
}

// AccessLogFields returns the extra fields of Caddy's access log entry for
// r when the server will write one (the same decision Caddy's server makes:
// access logs enabled, the host not skipped, no log_skip), else nil.
func AccessLogFields(r *http.Request) *caddyhttp.ExtraLogFields {
	ctx := r.Context()
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil {
		return nil
	}
	if skip, _ := caddyhttp.GetVar(ctx, caddyhttp.LogSkipVar).(bool); skip {
		return nil
	}
	if !hostLogged(srv.Logs, r.Host) {
		return nil
	}
	extra, _ := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields)
	return extra
}

// hostLogged mirrors caddyhttp's Server.shouldLogRequest host rules.
func hostLogged(l *caddyhttp.ServerLogConfig, hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	for name := range l.LoggerNames {
		if matchWildcard(host, name) {
			return true
		}
	}
	for _, h := range l.SkipHosts {
		if matchWildcard(host, h) {
			return false
		}
	}
	return !l.SkipUnmappedHosts
}

// matchWildcard is certmagic.MatchWildcard: an exact match, or a pattern
// whose leading labels are "*" standing for one label each.
func matchWildcard(subject, wildcard string) bool {
	subject, wildcard = strings.ToLower(subject), strings.ToLower(wildcard)
	if subject == wildcard {
		return true
	}
	if !strings.Contains(wildcard, "*") {
		return false
	}
	sl, wl := strings.Split(subject, "."), strings.Split(wildcard, ".")
	if len(sl) != len(wl) {
		return false
	}
	for i := range wl {
		if wl[i] != "*" && wl[i] != sl[i] {
			return false
		}
	}
	return true
}
