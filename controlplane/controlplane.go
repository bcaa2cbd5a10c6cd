// Package controlplane routes the gateway's management APIs (rate-limit
// policies, prompts, feedback) that the gateway answers itself, without
// calling a provider, and claims the Portkey control-plane APIs it does
// not serve so they are never forwarded to a provider. Feature packages register their routes at init, as provider
// packages register providers; llm_gateway hands matching requests here
// after authenticating them.
package controlplane

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

var (
	mu       sync.RWMutex
	mux      = http.NewServeMux()
	prefixes []string
)

// Handle registers h for a ServeMux pattern such as
// "GET /v1/policies/rate-limits/{id}". owned is the path prefix the
// feature owns (e.g. "/v1/policies/"): requests under it are never passed
// through to a provider, so a wrong method gets a 405, not a proxy call.
func Handle(pattern, owned string, h http.HandlerFunc) {
	mu.Lock()
	defer mu.Unlock()
	mux.HandleFunc(pattern, h)
	for _, p := range prefixes {
		if p == owned {
			return
		}
	}
	prefixes = append(prefixes, owned)
}

// Owns reports whether path belongs to a control-plane API.
func Owns(path string) bool {
	mu.RLock()
	defer mu.RUnlock()
	for _, p := range prefixes {
		if strings.HasPrefix(path, p) || path == strings.TrimSuffix(p, "/") {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// Caller is who called a control-plane API and with what.
type Caller struct {
	Identity *identity.Caller
	App      *app.App
	// Body is the request body, already read (and bounded) by the gateway.
	Body []byte
}

// Serve answers r from the registered routes. The gateway calls it only
// for paths Owns reports, after authenticating the caller.
func Serve(w http.ResponseWriter, r *http.Request, c *Caller) {
	// Control-plane bodies are JSON, read strictly before any API
	// decodes them: nested at most jsonlimit.MaxDepth levels, and each
	// member named once, names compared as decoded, so that a check an
	// API makes on a member ("no custom_host") reads the member its
	// decoder keeps. Each API reports a body that is not JSON itself.
	if len(c.Body) > 0 && !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		if err := CheckBody(c.Body); err != nil {
			apierror.Write(w, err)
			return
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, c))
	mu.RLock()
	_, pattern := mux.Handler(r)
	mu.RUnlock()
	if pattern != "" {
		// ServeHTTP (not h) so the mux sets r.PathValue.
		mux.ServeHTTP(w, r)
		return
	}
	if isUnserved(r.URL.Path) {
		notServed(w, r.URL.Path)
		return
	}
	// Answer misses in the OpenAI envelope, telling a wrong method from an
	// unknown path.
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		probe := r.Clone(r.Context())
		probe.Method = m
		mu.RLock()
		_, p := mux.Handler(probe)
		mu.RUnlock()
		if p != "" {
			apierror.Write(w, apierror.Newf(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "method %s is not allowed on %s", r.Method, apierror.QuotePath(r.URL.Path)))
			return
		}
	}
	apierror.Write(w, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown endpoint %s", apierror.QuotePath(r.URL.Path)))
}

// MaxBody bounds a control-plane request's body (keys, configs, prompts,
// policies, usage limits, ledger queries): those APIs read their bodies
// whole and keep them, and none needs more than a few kilobytes. The
// gateway answers a larger body 413 before reading it when its
// Content-Length says so, and stops reading it otherwise. File uploads
// are the jobs API's and bounded by max_request_body.
const MaxBody = 1 << 20

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

// From returns the caller of a control-plane request.
func From(r *http.Request) *Caller {
	c, _ := r.Context().Value(ctxKey{}).(*Caller)
	return c
}

// RequireScope serves h only to a caller whose gateway key holds scope
// (identity.Caller.Can: "*", "resource.*", and resource.read for
// resource.list count); any other caller gets MissingScope before h reads
// or changes anything.
func RequireScope(scope string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c := From(r); c == nil || c.Identity == nil || !c.Identity.Can(scope) {
			apierror.Write(w, MissingScope(scope))
			return
		}
		h(w, r)
	}
}

// MissingScope is the 403 of a key that lacks scope.
func MissingScope(scope string) *apierror.Error {
	return apierror.Newf(http.StatusForbidden, apierror.TypeInvalidRequest,
		"this gateway API key lacks the scope %s", scope).WithCode("missing_scope")
}
