package providers

import (
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// MissingKey is the 401 (code missing_provider_key) for a target without
// the credentials its provider needs; how tells the client what to send
// or configure.
func MissingKey(provider, how string) *apierror.Error {
	return apierror.Newf(http.StatusUnauthorized, apierror.TypeAuthentication,
		"no credentials for provider %q: %s", provider, how).WithCode("missing_provider_key")
}
