// Package observe records what happened to each request: one structured log
// entry per request (with every attempt), and the Prometheus metrics
// derived from it. Nothing here ever holds a secret: entries carry names
// (the gateway key's name, the provider slug), never keys.
package observe

import (
	"time"

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
	Metadata  map[string]string
	Attempts  []Attempt
	// Error is the gateway's own error message, if it produced one.
	Error string
	// Extra carries fields added by other parts of the pipeline (prompt id,
	// guardrail verdicts) without this package knowing them.
	Extra []zap.Field
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

type attempts []Attempt

func (as attempts) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, a := range as {
		if err := enc.AppendObject(a); err != nil {
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

// Write records the entry in the metrics and emits it at info level (warn
// for 5xx answers).
func (e *Entry) Write(logger *zap.Logger) {
	now := time.Now()
	e.record(now)
	lvl := zapcore.InfoLevel
	if e.Status >= 500 {
		lvl = zapcore.WarnLevel
	}
	ce := logger.Check(lvl, "llm request")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 20+len(e.Extra))
	fields = append(fields,
		zap.String("trace_id", e.TraceID),
		zap.String("api_key_name", e.KeyName),
		zap.String("workspace_id", e.Workspace),
		zap.String("endpoint", string(e.Operation)),
		zap.String("method", e.Method),
		zap.String("path", e.Path),
		zap.String("provider", e.Provider),
		zap.String("model", e.Model),
		zap.Int("status", e.Status),
		zap.Bool("stream", e.Stream),
		zap.Float64("duration_ms", float64(now.Sub(e.Start).Microseconds())/1000),
	)
	if !e.FirstByte.IsZero() {
		fields = append(fields, zap.Float64("ttfb_ms", float64(e.FirstByte.Sub(e.Start).Microseconds())/1000))
	}
	if e.VirtualKey != "" {
		fields = append(fields, zap.String("virtual_key", e.VirtualKey))
	}
	if e.ConfigID != "" {
		fields = append(fields, zap.String("config_id", e.ConfigID))
	}
	if e.CacheState != "" {
		fields = append(fields, zap.String("cache_status", e.CacheState))
	}
	if e.Usage != nil {
		fields = append(fields, zap.Object("usage", usageLog{e.Usage}))
	}
	if len(e.Metadata) > 0 {
		fields = append(fields, zap.Object("metadata", metadataLog(e.Metadata)))
	}
	if len(e.Attempts) > 0 {
		fields = append(fields, zap.Array("attempts", attempts(e.Attempts)))
	}
	if e.Error != "" {
		fields = append(fields, zap.String("error", e.Error))
	}
	fields = append(fields, e.Extra...)
	ce.Write(fields...)
}
