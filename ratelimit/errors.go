package ratelimit

import (
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// writeError answers r with e in the error shape of the API r calls:
// Anthropic's for the Messages API (its SDKs and Claude Code read no
// other), the OpenAI envelope for everything else, as llm_gateway
// answers them. It is the one writer of the handler's refusals, so it
// counts them (llm_gateway_refusals_total): a request it refuses never
// reaches llm_gateway, whose log entry counts the others.
func writeError(w http.ResponseWriter, r *http.Request, e *apierror.Error) {
	observe.RecordRefusal(observe.RefusalOf(e))
	path, _ := strings.CutPrefix(r.URL.Path, "/v1")
	switch providers.OperationFor(r.Method, path) {
	case providers.OpMessages, providers.OpCountTokens:
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set(apierror.HeaderGatewayError, "true")
		h.Del("Content-Length")
		w.WriteHeader(e.Status)
		_, _ = w.Write(messages.Reshape(e.Status, e.Body()))
	default:
		apierror.Write(w, e)
	}
}
