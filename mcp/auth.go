package mcp

import (
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

// identify authenticates the caller of r with the gateway's one key
// reading (ingress.GatewayKey: x-gateway-api-key, else the client's own
// Authorization: Bearer or x-api-key) and the llm app's one check (an
// identity llm_ratelimit already found for the same key, else
// Authenticate). A refused key gets the app's 401 saying why. The key is
// read here and nowhere else: nothing of the caller's request is sent to
// an MCP server.
func (h *Handler) identify(r *http.Request) (*identity.Caller, *apierror.Error) {
	key := ingress.GatewayKey(r.Header)
	if id, ok := h.app.Authenticated(r.Context(), key); ok {
		return id, nil
	}
	if id, ok := h.app.Authenticate(key); ok {
		return id, nil
	}
	return nil, h.app.AuthError(key)
}

// routeOf reads the server a path names: "" for /mcp, the name for
// /mcp/{name}; false for any other path.
func routeOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/mcp")
	switch {
	case !ok:
		return "", false
	case rest == "" || rest == "/":
		return "", true
	}
	name, ok := strings.CutPrefix(rest, "/")
	name = strings.TrimSuffix(name, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}
