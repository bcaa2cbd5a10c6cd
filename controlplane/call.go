package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// MaxBody bounds a control-plane request's body (keys, configs, prompts,
// policies, usage limits, ledger queries): those APIs read their bodies
// whole and keep them, and none needs more than a few kilobytes. The
// gateway answers a larger body 413 before reading it when its
// Content-Length says so, and stops reading it otherwise. File uploads
// are the jobs API's and bounded by max_request_body.
const MaxBody = 1 << 20

// OpControl is the operation a management call is recorded as (its log
// entry and metrics), by llm_gateway and llm_api alike; the usage ledger
// keeps none.
const OpControl providers.Operation = "control"

// Call is one management API request, as its handler sees it.
type Call struct {
	// Request is the HTTP request; PathValue reads the route's wildcards.
	Request *http.Request
	// Caller is who is calling, authenticated by the handler serving the
	// site (llm_gateway or llm_api).
	Caller *identity.Caller
	// Body is the request body, already read, bounded by MaxBody and
	// checked strictly (CheckBody).
	Body []byte

	router *Router
	// header holds the response headers a handler sets (SetHeader), written
	// with its value.
	header http.Header
}

// SetHeader sets a header of the successful answer (an ETag); an error
// answer carries none of them.
func (c *Call) SetHeader(name, value string) {
	if c.header == nil {
		c.header = http.Header{}
	}
	c.header.Set(name, value)
}

// Context is the request's context.
func (c *Call) Context() context.Context { return c.Request.Context() }

// PathValue is the route wildcard name's value.
func (c *Call) PathValue(name string) string { return c.Request.PathValue(name) }

// Query is the request's query string.
func (c *Call) Query() url.Values { return c.Request.URL.Query() }

// Decode decodes the body, a JSON object, into v: a 400 for anything else.
// The body was read strictly before (a member named twice, names compared
// as decoded, never reaches a handler).
func (c *Call) Decode(v any) error {
	if len(bytes.TrimSpace(c.Body)) == 0 {
		return apierror.BadRequest("", "the request body must be a JSON object")
	}
	if err := json.Unmarshal(c.Body, v); err != nil {
		return apierror.BadRequest("", "the request body must be a JSON object of the documented shape")
	}
	return nil
}

// Workspace is the tenancy rule of the management APIs: the workspace a
// call acts in when it names named ("" or the caller's own: the caller's
// workspace). A workspace key reaches its own workspace only; an
// organisation key every workspace of its organisation, never one another
// organisation holds records in. Beyond reach: 403 workspace_forbidden.
func (c *Call) Workspace(named string) (string, error) {
	id := c.Caller
	if named == "" || named == id.WorkspaceID {
		return id.WorkspaceID, nil
	}
	if id.Type != keys.TypeOrganisation {
		return "", WorkspaceForbidden("this gateway API key can only reach its own workspace")
	}
	if ws := c.router.opts.Workspaces; ws != nil {
		if _, foreign := ws.ForeignOrganisation(named, id.OrganisationID); foreign {
			return "", WorkspaceForbidden("the workspace is not in this gateway API key's organisation")
		}
	}
	return named, nil
}

// Reaches reports whether a record of organisation org and workspace ws
// is within the caller's reach (the same rule as Workspace): one of
// another tenant is answered as if it did not exist.
func (c *Call) Reaches(org, ws string) bool {
	return keys.Manages(c.Caller, org, ws)
}

// WorkspaceForbidden is the 403 of a workspace out of the caller's reach.
func WorkspaceForbidden(msg string) *apierror.Error {
	e := apierror.New(http.StatusForbidden, apierror.TypeInvalidRequest, msg).WithCode("workspace_forbidden")
	e.Param = "workspace_id"
	return e
}

// Audit records a change the call made (the one audit writer): the acting
// key by id, the changed fields by name, never a value.
func (c *Call) Audit(action, resourceType, resourceID, ws, org string, fields []string) {
	if a := c.router.opts.Auditor; a != nil {
		a.Audit(c.Context(), c.Caller, action, resourceType, resourceID, ws, org, fields)
	}
}

// ETag is the entity tag of version version of record id: strong, and
// naming the record too, so a record deleted and created again under the
// same name (a virtual key's slug) never matches the old one's tag.
func ETag(id string, version int64) string {
	return `"` + id + "." + strconv.FormatInt(version, 10) + `"`
}

// maxIfMatch bounds the If-Match header read (a few tags).
const maxIfMatch = 1024

// IfMatch reports whether the request names preconditions (an If-Match
// header) and, if so, whether etag, the stored record's current tag,
// meets them (RFC 9110 13.1.1: "*" or one of the listed tags, compared
// strongly, so a weak tag never matches). A write checks it against the
// record it read inside its compare-and-set, so the check and the write
// see the same version.
func (c *Call) IfMatch(etag string) (given, ok bool) {
	h := c.Request.Header.Values("If-Match")
	if len(h) == 0 {
		return false, true
	}
	n := 0
	for _, line := range h {
		if n += len(line); n > maxIfMatch {
			return true, false
		}
		for _, t := range strings.Split(line, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || t == etag {
				return true, true
			}
		}
	}
	return true, false
}

// PreconditionFailed is the 412 of a write whose If-Match no longer names
// the stored version: nothing was stored.
func PreconditionFailed() *apierror.Error {
	return apierror.New(http.StatusPreconditionFailed, apierror.TypeInvalidRequest,
		"the record changed since the version If-Match names and nothing was stored; read it again (its ETag) and retry").WithCode("precondition_failed")
}

// CheckBody is the strict reading of a control-plane body: it returns
// the 400 for one nested too deep, with invalid UTF-8, or naming a
// member twice (the error's param names the member), and nil for
// anything else, a body that is not JSON included, which the API
// decoding it reports in its own words.
func CheckBody(b []byte) *apierror.Error {
	err := jsonlimit.Check(b)
	if d, ok := jsonlimit.AsDuplicate(err); ok {
		return apierror.BadRequest(d.Path, "the request body is not acceptable: %v", d)
	}
	switch err {
	case jsonlimit.ErrTooDeep, jsonlimit.ErrInvalidUTF8, jsonlimit.ErrSurrogateName:
		return apierror.BadRequest("body", "%v", err)
	}
	return nil
}

// ReadBody is the gateway's one reader of a whole request body, at most
// limit bytes (MaxBody when limit ≤ 0): llm_api reads a management body
// with it, and llm_gateway every body it does not read into a lent buffer
// (a management body with limit min(max_request_body, MaxBody)). A body
// an earlier handler recorded (ingress.SetBody: llm_ratelimit read it) is
// not read again. A declared size over limit is refused before reading
// (413 request_too_large), a declared size is read in one exact
// allocation, and an undeclared one through a limiting reader; a limit
// in front of the gateway (Caddy's request_body) is reported with its own
// bound. w is the response the limiting reader tells to close the
// connection when the limit is passed.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxBody
	}
	if body, ok := ingress.Body(r); ok {
		if int64(len(body)) > limit {
			return nil, TooLarge(limit)
		}
		return body, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, TooLarge(limit)
	}
	var body []byte
	var err error
	if r.ContentLength > 0 {
		// net/http ends the body at Content-Length: no limiting reader.
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if err != nil {
		return nil, ReadError(err)
	}
	return body, nil
}

// ReadError is the answer to a body that could not be read: 413 for one
// cut by a limiting reader (its bound named), else 400.
func ReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLarge(mbe.Limit)
	}
	return apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest, "could not read the request body")
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) error {
	return apierror.Newf(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest,
		"request body exceeds the gateway's limit of %d bytes", limit).WithCode("request_too_large")
}
