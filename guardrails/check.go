package guardrails

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// Namespace is the Caddy module namespace of checks: a check named "pii"
// is the module "llm.checks.pii".
const Namespace = "llm.checks"

// Stage says which side of the provider call a hook runs on.
type Stage uint8

// Stages.
const (
	BeforeRequest Stage = iota
	AfterRequest
)

// EventType is the reference gateway's name for the stage, as sent to
// webhooks ("beforeRequestHook" / "afterRequestHook").
func (s Stage) EventType() string {
	if s == AfterRequest {
		return "afterRequestHook"
	}
	return "beforeRequestHook"
}

// Check is implemented by every module in the llm.checks namespace. Check
// judges in with the check's parameters (the JSON object of the config's
// "parameters", never nil) and returns a verdict.
//
// Returning an error reports the check as errored. The verdict's Pass is
// kept as returned (a check may pass and still report an error, as the
// reference's requiredMetadataKeys does); the hook treats an errored check
// as passing unless its parameters set "failOnError": true.
type Check interface {
	Check(ctx context.Context, in *Input, params json.RawMessage) (Verdict, error)
}

// Preparer is implemented by checks that can validate and pre-compile
// their parameters once, when a config is first seen or a saved guardrail
// is loaded. The returned Check is bound to params (its own params
// argument may be ignored). An error from Prepare rejects the config: a
// 400 for a request's config, a load failure for a saved guardrail.
// Required parameters are checked by Validator first; Prepare refuses what
// only compiling shows (a regular expression RE2 cannot compile).
type Preparer interface {
	Prepare(params json.RawMessage) (Check, error)
}

// Validator is implemented by checks with required parameters. Validate
// refuses parameters the check can never judge with (a missing required
// parameter, one of the wrong type), naming the parameter; it runs before
// Prepare when a config is first seen or a saved guardrail or config is
// loaded, so such a config is a 400 or a load failure rather than a check
// that errors, and so passes, on every request.
type Validator interface {
	Validate(params json.RawMessage) error
}

// Remote is implemented by checks that call out over the network; the
// runner runs several of them concurrently within a hook.
type Remote interface {
	Remote() bool
}

// CheckFunc adapts a function to Check.
type CheckFunc func(ctx context.Context, in *Input, params json.RawMessage) (Verdict, error)

// Check implements Check.
func (f CheckFunc) Check(ctx context.Context, in *Input, params json.RawMessage) (Verdict, error) {
	return f(ctx, in, params)
}

// Verdict is what a check decides.
type Verdict struct {
	// Pass is the check's verdict.
	Pass bool
	// Data is reported as the check result's "data" (any JSON value).
	Data any
	// Log is reported as the check result's "log".
	Log any
	// Transformed says Body replaces the stage's JSON: the request body
	// before the request, the answer body after it.
	Transformed bool
	Body        []byte
}

// Env is what checks may use from the gateway. Checks that make outbound
// calls must use Client, whose dialer enforces the gateway's egress policy.
type Env struct {
	// Client makes every outbound call of webhook, log and validUrls. Nil
	// makes those checks report an error. See NewEgressClient.
	Client *http.Client
	// LookupHost resolves names for validUrls with onlyDNS. Nil uses
	// net.DefaultResolver.
	LookupHost func(ctx context.Context, host string) ([]string, error)
}

// Input is what a check sees: the request, and after the request the
// answer. Checks must treat it as read-only; to change the body return a
// transformed Verdict.
type Input struct {
	Stage Stage
	// RequestType is the reference gateway's name for the call:
	// chatComplete, complete, embed, messages, createModelResponse, …,
	// prefixed "stream-" for streamed calls (see RequestType).
	RequestType string
	// Format is the base type (as BaseType names it) whose JSON shape
	// Request and Response have, when it is not the call's own: a call a
	// format adapter translated (a Messages or Responses call sent to a
	// chat target) is judged on the chat completion the target was sent
	// and answered. Empty means BaseType.
	Format   string
	Provider string
	Model    string
	Metadata map[string]string
	// Request is the request's JSON body (after earlier mutators).
	Request []byte
	// Response is the answer's JSON body; nil for a streamed answer.
	Response []byte
	// ResponseText is the assembled text of a streamed answer.
	ResponseText string
	StatusCode   int
	Stream       bool
	// RequestTransformed and ResponseTransformed record earlier mutations.
	RequestTransformed  bool
	ResponseTransformed bool
	Env                 *Env

	text       string
	textSet    bool
	payload    []byte
	payloadSet bool
}

// BaseType is RequestType without the "stream-" prefix.
func (in *Input) BaseType() string { return strings.TrimPrefix(in.RequestType, "stream-") }

// BodyType is the base type whose JSON shape Request and Response have:
// Format, or BaseType when the call was not translated. Checks that read
// or rewrite the bodies go by it; checks about the call itself
// (allowedRequestTypes) by RequestType.
func (in *Input) BodyType() string {
	if in.Format != "" {
		return in.Format
	}
	return in.BaseType()
}

// Text is the text the reference's checks read for this stage: before the
// request the last message's text (its text parts joined by "\n"), the
// prompt, or the embedding input; after it the first choice's content
// (or a streamed answer's assembled text).
func (in *Input) Text() string {
	if !in.textSet {
		in.text = currentText(in)
		in.textSet = true
	}
	return in.text
}

// Body is the JSON the stage's checks act on: the request body before the
// request, the answer body after it.
func (in *Input) Body() []byte {
	if in.Stage == AfterRequest {
		return in.Response
	}
	return in.Request
}

// Payload is the JSON the reference posts to webhooks and log URLs: the
// request and answer JSON and text, provider, requestType, metadata and
// eventType (request headers are never sent). It is built once per stage
// and body and shared by every check that sends it: each webhook check of
// a request held its own copy of a large prompt before. Callers must not
// modify it.
func (in *Input) Payload() []byte {
	if !in.payloadSet {
		in.payload = spanContext(in)
		in.payloadSet = true
	}
	return in.payload
}

func (in *Input) setBody(b []byte) {
	if in.Stage == AfterRequest {
		in.Response, in.ResponseTransformed = b, true
	} else {
		in.Request, in.RequestTransformed = b, true
	}
	in.textSet, in.payloadSet, in.payload = false, false, nil
}

// spanContext builds Payload.
func spanContext(in *Input) []byte {
	raw := func(b []byte) json.RawMessage {
		if len(b) == 0 || !json.Valid(b) {
			return json.RawMessage("null")
		}
		return b
	}
	reqText, respText := "", ""
	if in.Stage == BeforeRequest {
		reqText = in.Text()
	} else {
		respText = in.Text()
	}
	status := any(nil)
	if in.StatusCode != 0 {
		status = in.StatusCode
	}
	b, _ := json.Marshal(map[string]any{
		"request": map[string]any{
			"json": raw(in.Request), "text": reqText, "isStreamingRequest": in.Stream,
			"isTransformed": in.RequestTransformed,
		},
		"response": map[string]any{
			"json": raw(in.Response), "text": respText, "statusCode": status,
			"isTransformed": in.ResponseTransformed,
		},
		"provider": in.Provider, "requestType": in.RequestType, "metadata": in.Metadata,
		"eventType": in.Stage.EventType(),
	})
	return b
}

// lookupCheck finds the module for a config check id. "default.regexMatch"
// and "regexMatch" both name llm.checks.regexMatch; "acme.pii" names
// llm.checks.acme.pii. Names are matched case-insensitively when there is
// no exact match, so the reference's "default.modelwhitelist" works.
func lookupCheck(id string) (Check, bool) {
	name := strings.TrimPrefix(id, "default.")
	if info, err := caddy.GetModule(Namespace + "." + name); err == nil {
		c, ok := info.New().(Check)
		return c, ok
	}
	for _, info := range caddy.GetModules(Namespace) {
		if strings.EqualFold(string(info.ID), Namespace+"."+name) {
			c, ok := info.New().(Check)
			return c, ok
		}
	}
	return nil, false
}
