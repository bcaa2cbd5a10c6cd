package handlers

import (
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Local answers. Some requests are answered by the gateway itself, never
// by a provider: the control-plane APIs (rate-limit policies, prompts,
// feedback, and whatever else registers with package controlplane), the
// gateway's file store and managed batches, the Responses it stored, and
// the token count of a Messages call no target can count.
// Each such API is one entry of localAPIs; the pipeline asks them once,
// after parsing and before planning:
//
//	parse ─ local? ─ yes → the local answer, written by the responder
//	               ─ no  → plan ─ run
//
// An API that is not local for a request (a provider's file, a response
// id the store does not know) says so and the request is routed.

// localAPI is one API the gateway answers itself.
type localAPI struct {
	// name says which API it is, for tests and errors.
	name string
	// answer returns the answer to q, or nil when q is not this API's
	// (or not local: it is then routed). A returned error is the
	// client's answer.
	answer func(g *Gateway, r *http.Request, q *Request) (*localAnswer, error)
}

// localAnswer is how the gateway answers a request itself: either serve
// writes the answer (a control-plane handler), or held is the complete
// answer, written as a provider's held answer would be.
type localAnswer struct {
	// op is the operation the log entry records.
	op    providers.Operation
	serve func(w http.ResponseWriter)
	held  *heldAnswer
}

// localAPIs are the APIs the gateway answers itself, asked in order. The
// first that claims a request answers it.
var localAPIs = [...]localAPI{
	{name: "control", answer: (*Gateway).controlPlane},
	{name: "jobs", answer: (*Gateway).localJobs},
	{name: "responses", answer: (*Gateway).storedResponse},
	{name: "count_tokens", answer: (*Gateway).countEstimate},
}

// local asks the local APIs for q's answer; nil when q is to be routed.
func (g *Gateway) local(r *http.Request, q *Request) (*localAnswer, error) {
	for i := range localAPIs {
		if a, err := localAPIs[i].answer(g, r, q); a != nil || err != nil {
			return a, err
		}
	}
	return nil, nil
}

// opControl is the logged operation of a control-plane call.
const opControl providers.Operation = "control"

// controlPlane answers the management APIs registered with package
// controlplane, as the authenticated caller. Their paths are no
// inference operation's; a prompt completion lies under the prompts
// API's prefix but parse made it a chat completion, so it is routed.
func (g *Gateway) controlPlane(r *http.Request, q *Request) (*localAnswer, error) {
	if q.Call.Op != providers.OpProxy || !controlplane.Owns(r.URL.Path) {
		return nil, nil
	}
	caller := &controlplane.Caller{Identity: q.Identity, App: g.app, Body: q.Call.Body}
	return &localAnswer{op: opControl, serve: func(w http.ResponseWriter) {
		controlplane.Serve(w, r, caller)
	}}, nil
}

// writeLocal writes a local answer to the client through the responder.
func (f *flight) writeLocal(a *localAnswer) {
	if a.held != nil {
		f.out.held(a.held, nil, false)
		return
	}
	f.out.control(a.serve)
}
