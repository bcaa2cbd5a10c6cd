package controlplane

import (
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Feedback API (Portkey's POST /v1/feedback and PUT /v1/feedback/{id}).
// The gateway keeps no feedback store: each accepted feedback is written
// as one log line ("feedback", logger llm.feedback) carrying its trace id,
// value, weight and the names of its metadata keys, so it can be joined
// with the request's own log line by trace id. Metadata values are never
// logged: they are free text and may hold anything.
const (
	feedbackPath = "/v1/feedback"
	// MaxFeedbackBatch bounds the feedbacks of one bulk create.
	MaxFeedbackBatch = 100
	// maxLoggedKeys bounds the metadata key names logged per feedback.
	maxLoggedKeys = 32
	// maxLoggedKeyBytes bounds each logged metadata key name.
	maxLoggedKeyBytes = 64
)

func init() { caddy.RegisterModule(Feedback{}) }

// Feedback is the llm.api.feedback module: the feedback API.
type Feedback struct{}

// CaddyModule returns the Caddy module information.
func (Feedback) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + ".feedback", New: func() caddy.Module { return new(Feedback) }}
}

// Routes implements Module. Feedback needs no scope: any key that may
// call models may say what it thought of an answer.
func (Feedback) Routes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: feedbackPath, Handler: createFeedback},
		{Method: http.MethodPut, Path: feedbackPath + "/{id}", Handler: updateFeedback},
	}
}

// feedback is one validated feedback.
type feedback struct {
	ID       string
	TraceID  string
	Value    *int
	Weight   float64
	Metadata []string // key names only
}

// feedbackResponse is Portkey's answer to a feedback call.
type feedbackResponse struct {
	Status      string   `json:"status"`
	Message     string   `json:"message"`
	FeedbackIDs []string `json:"feedback_ids"`
}

func createFeedback(c *Call) (any, error) {
	root, err := feedbackBody(c)
	if err != nil {
		return nil, err
	}
	var items []gjson.Result
	prefix := func(int) string { return "" }
	switch {
	case root.IsObject():
		items = []gjson.Result{root}
	case root.IsArray():
		items = root.Array()
		if len(items) == 0 || len(items) > MaxFeedbackBatch {
			return nil, apierror.BadRequest("", "a feedback array holds 1 to %d feedbacks", MaxFeedbackBatch)
		}
		prefix = func(i int) string { return "[" + strconv.Itoa(i) + "]." }
	default:
		return nil, apierror.BadRequest("", "the body must be a feedback object or an array of them")
	}
	out := make([]*feedback, 0, len(items))
	for i, it := range items {
		f, err := parseFeedback(it, prefix(i), true)
		if err != nil {
			return nil, err
		}
		f.ID = uuid.NewString()
		out = append(out, f)
	}
	ids := make([]string, len(out))
	for i, f := range out {
		logFeedback(c, "feedback", f)
		ids[i] = f.ID
	}
	return feedbackAnswer(ids), nil
}

func updateFeedback(c *Call) (any, error) {
	id := c.PathValue("id")
	if !apierror.IDShaped(id) {
		return nil, apierror.BadRequest("feedback_id", "feedback_id must be a feedback id (at most %d letters, digits, '-', '_', '.', ':')", apierror.MaxQuoted)
	}
	root, err := feedbackBody(c)
	if err != nil {
		return nil, err
	}
	if !root.IsObject() {
		return nil, apierror.BadRequest("", "the body must be a feedback object")
	}
	f, err := parseFeedback(root, "", false)
	if err != nil {
		return nil, err
	}
	f.ID = id
	logFeedback(c, "feedback updated", f)
	return feedbackAnswer([]string{id}), nil
}

// feedbackBody checks the body before gjson walks it.
func feedbackBody(c *Call) (gjson.Result, error) {
	if err := jsonlimit.Check(c.Body); err != nil {
		return gjson.Result{}, apierror.BadRequest("", "the body must be JSON: %v", err)
	}
	return gjson.ParseBytes(c.Body), nil
}

// parseFeedback validates one feedback object. at prefixes the field names
// in error params (e.g. "[2]."). A create needs trace_id and value; an
// update takes any of value, weight, metadata.
func parseFeedback(o gjson.Result, at string, create bool) (*feedback, error) {
	if !o.IsObject() {
		return nil, apierror.BadRequest(strings.TrimSuffix(at, "."), "each feedback must be a JSON object")
	}
	f := &feedback{Weight: 1}
	if create {
		tr := o.Get("trace_id")
		if !tr.Exists() {
			// The Node SDK sends its option name as is.
			tr = o.Get("traceID")
		}
		if tr.Type != gjson.String || strings.TrimSpace(tr.Str) == "" {
			return nil, apierror.BadRequest(at+"trace_id", "%strace_id is required: the trace id of the request the feedback is about (its x-gateway-trace-id response header)", at)
		}
		if len(tr.Str) > ingress.MaxTraceIDBytes || !utf8.ValidString(tr.Str) {
			return nil, apierror.BadRequest(at+"trace_id", "%strace_id must be at most %d bytes of UTF-8", at, ingress.MaxTraceIDBytes)
		}
		f.TraceID = tr.Str
	}
	if v := o.Get("value"); v.Exists() || create {
		if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || v.Num < -10 || v.Num > 10 {
			return nil, apierror.BadRequest(at+"value", "%svalue is required and must be an integer from -10 to 10", at)
		}
		n := int(v.Num)
		f.Value = &n
	}
	if wt := o.Get("weight"); wt.Exists() && wt.Type != gjson.Null {
		if wt.Type != gjson.Number || wt.Num < 0 || wt.Num > 1 {
			return nil, apierror.BadRequest(at+"weight", "%sweight must be a number from 0 to 1 (default 1)", at)
		}
		f.Weight = wt.Num
	}
	if md := o.Get("metadata"); md.Exists() && md.Type != gjson.Null {
		if !md.IsObject() {
			return nil, apierror.BadRequest(at+"metadata", "%smetadata must be a JSON object", at)
		}
		more := false
		md.ForEach(func(k, _ gjson.Result) bool {
			if len(f.Metadata) == maxLoggedKeys {
				more = true
				return false
			}
			name := strings.ToValidUTF8(k.String(), "\uFFFD")
			if len(name) > maxLoggedKeyBytes {
				name = name[:maxLoggedKeyBytes]
				name = strings.ToValidUTF8(name, "")
			}
			f.Metadata = append(f.Metadata, name)
			return true
		})
		sort.Strings(f.Metadata)
		if more {
			f.Metadata = append(f.Metadata, "…")
		}
	}
	return f, nil
}

// logFeedback writes one accepted feedback to the log.
func logFeedback(c *Call, msg string, f *feedback) {
	fields := []zap.Field{
		zap.String("feedback_id", f.ID),
		zap.Float64("weight", f.Weight),
		zap.Strings("metadata_keys", f.Metadata),
	}
	if f.TraceID != "" {
		fields = append(fields, zap.String("trace_id", f.TraceID))
	}
	if f.Value != nil {
		fields = append(fields, zap.Int("value", *f.Value))
	}
	fields = append(fields, zap.String("key_name", c.Caller.Name), zap.String("workspace_id", c.Caller.WorkspaceID))
	caddy.Log().Named("llm.feedback").Info(msg, fields...)
}

func feedbackAnswer(ids []string) feedbackResponse {
	return feedbackResponse{Status: "success", Message: "feedback logged", FeedbackIDs: ids}
}
