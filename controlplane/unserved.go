package controlplane

import (
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Unserved are the Portkey SDK's control-plane APIs this gateway does not
// implement (keys, virtual keys, configs and the audit log are served by
// package keys/keysapi; the analytics graphs and groups and GET /v1/logs
// by ledger/ledgerapi, whose routes are matched first, so
// only the rest of /v1/logs/ and /v1/analytics/ answer here). Owning them
// keeps such calls from being forwarded to an LLM provider with the
// provider's key: they get a 404 envelope from the gateway instead.
// Sources: portkey-python-sdk PortkeyApiPaths and portkey-node-sdk
// constants. /v1/providers is left out on purpose: OpenRouter serves
// GET /v1/providers, so it stays a provider path.
var Unserved = []string{
	"/v1/logs/",
	"/v1/analytics/",
	"/v1/admin/",
	"/v1/guardrails/",
	"/v1/integrations/",
	"/v1/mcp-servers/",
	"/v1/mcp-integrations/",
	"/v1/collections/",
	"/v1/labels/",
	"/v1/prompt/",
}

// isUnserved reports whether path is one of the Unserved APIs (or of a
// module not loaded).
func (rt *Router) isUnserved(path string) bool {
	for _, p := range rt.unserved {
		if strings.HasPrefix(path, p) || path == strings.TrimSuffix(p, "/") {
			return true
		}
	}
	return false
}

// notServed is the 404 for an Unserved API.
func notServed(w http.ResponseWriter, path string) {
	apierror.Write(w, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound,
		"the gateway does not serve the control-plane API %s",
		apierror.QuotePath(path)).WithCode("control_plane_not_served"))
}
