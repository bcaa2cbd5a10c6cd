package providers

import (
	"net/url"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// BaseURL returns the URL a provider appends its request paths to: def
// (the provider's own API base), or the target's custom_host when it has
// one, normalised by CustomBase. The result is the caller's to change.
func BaseURL(customHost, def, defPath string) (*url.URL, error) {
	if customHost != "" {
		return CustomBase(customHost, defPath)
	}
	return url.Parse(def)
}

// CustomBase is the one rule for a custom_host, shared by every provider:
// an http or https URL with a host (anything else is a 400 on
// custom_host, since the value may come from a request header), whose
// path, without its trailing slash, prefixes every request path. A host
// given without a path gets defPath (the provider's version prefix, such
// as "/v1"), so "http://proxy:8080" and "http://proxy:8080/v1" both
// work. Query, fragment and user information are dropped: a transport
// sends none of them, and a URL that keeps them leaks them into logs. A
// default port is dropped as well, so the Host header sent (and signed,
// for AWS) is the one the transport writes.
func CustomBase(customHost, defPath string) (*url.URL, error) {
	u, err := url.Parse(customHost)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, apierror.BadRequest("custom_host", "invalid custom_host: expected an http or https URL such as https://proxy.example/v1")
	}
	if (u.Scheme == "https" && u.Port() == "443") || (u.Scheme == "http" && u.Port() == "80") {
		u.Host = u.Hostname()
		if strings.IndexByte(u.Host, ':') >= 0 {
			u.Host = "[" + u.Host + "]" // an IPv6 literal keeps its brackets
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if u.Path == "" {
		u.Path = defPath
	}
	u.RawPath, u.RawQuery, u.Fragment, u.User, u.ForceQuery = "", "", "", nil, false
	return u, nil
}
