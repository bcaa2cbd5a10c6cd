package oaiwire

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Base returns the base URL a provider's paths are appended to: def, or
// the target's custom_host when set. A custom host given without a path
// gets defPath (the provider's version prefix, such as "/v1"), so
// "http://proxy:8080" and "http://proxy:8080/v1" both work.
func Base(customHost, def, defPath string) (string, error) {
	if customHost == "" {
		return def, nil
	}
	u, err := url.Parse(customHost)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", apierror.BadRequest("custom_host", "custom_host must be an http or https URL")
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = defPath
	}
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return strings.TrimRight(u.String(), "/"), nil
}

// MissingKey is the 401 for a target without credentials.
func MissingKey(provider, how string) *apierror.Error {
	return apierror.Newf(http.StatusUnauthorized, apierror.TypeAuthentication,
		"no credentials for provider %q: %s", provider, how).WithCode("missing_provider_key")
}

// Unsupported is the 400 for an endpoint a provider does not offer.
func Unsupported(provider, what string) *apierror.Error {
	return apierror.Newf(http.StatusBadRequest, apierror.TypeInvalidRequest, "%s is not supported by provider %q", what, provider).WithCode("unsupported_endpoint")
}
