package mcp

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Limits and the ledger. Each tools/call of a tool the caller may use is
// admitted as a model request is (app.AdmitCall): through the
// llm_ratelimit stage in front of the route, which lets the MCP message
// itself through uncounted and hands its key on, and through the usage
// limits. The limits see the call as a request of the caller's key with
// the caller's x-gateway-metadata and two members the gateway sets (the
// caller's own are replaced): mcp_server and mcp_tool (the server's name
// and the tool's name as the server lists it), so a policy counts calls
// per key, per server or per tool with conditions and group_by on
// api_key, metadata.mcp_server and metadata.mcp_tool. A refused call is
// answered with the stage's HTTP status and headers and JSON-RPC error
// codeLimited. Every tools/call, refused or not, is one ledger record of
// operation mcp_call.

// Metadata members the gateway sets on a call.
const (
	MetaServer = "mcp_server"
	MetaTool   = "mcp_tool"
	// metaRequestBytes and metaResponseBytes are the call's sizes in its
	// ledger record (the ledger has no columns for them).
	metaRequestBytes  = "mcp_request_bytes"
	metaResponseBytes = "mcp_response_bytes"
)

// OpCall is the ledger operation of a tools/call.
const OpCall providers.Operation = "mcp_call"

// metered is an admitted call: the request the stages saw, on which their
// settlements are registered, and the metadata it was matched with.
type metered struct {
	req  *http.Request
	meta map[string]string
}

// callMetadata is the metadata a call is matched and recorded with: the
// caller's x-gateway-metadata (refused when malformed, as on /v1) and the
// gateway's members.
func callMetadata(r *http.Request, server, tool string) (map[string]string, error) {
	meta := map[string]string{}
	for _, h := range [2]string{ingress.Prefix + ingress.Metadata, ingress.AliasPrefix + ingress.Metadata} {
		if v := r.Header.Get(h); v != "" {
			m, err := ingress.ParseMetadata(v)
			if err != nil {
				return nil, err
			}
			for k, v := range m {
				meta[k] = v
			}
			break
		}
	}
	meta[MetaServer], meta[MetaTool] = server, tool
	return meta, nil
}

// admit passes the call of rec through the limits. A refusal has been
// answered to w (and rec marked) when ok is false.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, id *identity.Caller, msg *message, rec *callRecord) (m *metered, ok bool) {
	meta, err := callMetadata(r, rec.Server, rec.Upstream)
	if err != nil {
		rec.setStatus(statusRejected, codeInvalidRequest)
		writeError(w, http.StatusBadRequest, msg.id, codeInvalidRequest, err.Error(), nil)
		return nil, false
	}
	mj, _ := json.Marshal(meta)
	hdr := http.Header{http.CanonicalHeaderKey(ingress.Prefix + ingress.Metadata): {string(mj)}}
	key := handoff.From(r.Context()).Admission(h.app.Issuer())
	req, ref := h.app.AdmitCall(r.Context(), key, h.budget, id, r.URL.Path, hdr, []byte("{}"))
	if ref != nil {
		rec.setStatus(statusLimited, codeLimited)
		rec.limit = ref
		for k, vs := range ref.Header {
			if k == "Content-Type" || k == "Content-Length" {
				continue
			}
			w.Header()[k] = vs
		}
		writeError(w, ref.Status, msg.id, codeLimited, ref.Message,
			map[string]any{"type": ref.Type, "code": ref.Code, "status": ref.Status})
		return &metered{meta: meta}, false
	}
	return &metered{req: req, meta: meta}, true
}

// done settles the call's limits and writes its ledger record. m is nil
// for a call refused before the limits (a name the key cannot use).
func (h *Handler) done(r *http.Request, m *metered, rec *callRecord) {
	rec.mu.Lock()
	e := observe.Entry{
		TraceID: newTraceID(), KeyName: rec.KeyName, Workspace: rec.Workspace, Organisation: rec.Organisation,
		Operation: OpCall, Method: http.MethodPost, Path: r.URL.Path,
		Provider: "mcp", Model: rec.Name, Status: rec.httpStatus(), Start: rec.Start,
		CacheState: "", Stream: false,
	}
	if rec.Server != "" {
		e.Provider, e.Model = "mcp:"+rec.Server, rec.Upstream
	}
	if rec.Status != statusOK {
		e.ErrorType = rec.Status
	}
	var meta map[string]string
	if m != nil {
		meta = m.meta
	} else {
		meta = map[string]string{}
	}
	meta[metaRequestBytes] = strconv.FormatInt(rec.RequestBytes, 10)
	meta[metaResponseBytes] = strconv.FormatInt(rec.ResponseBytes, 10)
	rec.mu.Unlock()
	e.Metadata = meta
	if m != nil && m.req != nil {
		observe.RunDone(m.req, &e)
	}
	h.app.UsageLedger().Record(&e)
}

// httpStatus is the status a call's ledger record carries: what an HTTP
// request with the same outcome would have answered.
func (r *callRecord) httpStatus() int {
	switch r.Status {
	case statusOK, statusToolError:
		return http.StatusOK
	case statusError, statusUnavailable:
		return http.StatusBadGateway
	case statusCancelled:
		return 499
	case statusDenied:
		return http.StatusNotFound
	case statusLimited:
		if r.limit != nil {
			return r.limit.Status
		}
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}

func newTraceID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
