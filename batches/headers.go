package batches

import (
	"net/http"
	"net/url"
	"strings"
)

// persistable are the routing headers a batch record may keep in storage:
// they name things (providers, virtual keys, saved configs) but hold no
// secret. Both prefixes the gateway accepts are listed.
var persistable = map[string]bool{}

func init() {
	for _, p := range []string{"x-gateway-", "x-portkey-"} {
		for _, n := range []string{"provider", "virtual-key", "config", "metadata", "trace-id", "cache-namespace",
			"cache-force-refresh", "request-timeout", "custom-host", "forward-headers"} {
			persistable[p+n] = true
		}
	}
}

// dropped are never kept: the gateway key (the caller is already
// authenticated and each line runs as Caller) and per-message headers.
var dropped = map[string]bool{
	"x-gateway-api-key": true, "x-portkey-api-key": true, "content-length": true, "content-type": true,
	"content-encoding": true, "transfer-encoding": true, "connection": true, "host": true, "accept-encoding": true,
	"expect": true, "te": true, "upgrade": true, "keep-alive": true, "cookie": true,
}

// SplitHeader divides the batch creation request's headers into those
// stored with the record (routing names, no secrets) and those held only
// in memory (provider credentials, inline configs, anything unknown). A
// config header counts as persistable only when it names a saved config;
// an inline JSON config can hold credentials, and so can a custom host
// URL with userinfo (https://user:pass@host) or a query.
func SplitHeader(h http.Header) (persist, memory http.Header) {
	persist, memory = http.Header{}, http.Header{}
	for k, vs := range h {
		lk := strings.ToLower(k)
		switch {
		case dropped[lk]:
		case persistable[lk] && !(strings.HasSuffix(lk, "-config") && inlineConfig(vs)) &&
			!(strings.HasSuffix(lk, "-custom-host") && credentialURL(vs)):
			persist[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
		default:
			memory[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
		}
	}
	return persist, memory
}

// credentialURL reports whether a custom host value may carry a
// credential: userinfo, a query or a fragment (or a value that does not
// parse, which is then not stored either).
func credentialURL(vs []string) bool {
	for _, v := range vs {
		u, err := url.Parse(strings.TrimSpace(v))
		if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Contains(v, "@") {
			return true
		}
	}
	return false
}

func inlineConfig(vs []string) bool {
	for _, v := range vs {
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			return true
		}
	}
	return false
}

func mergeHeader(a, b http.Header) http.Header {
	out := make(http.Header, len(a)+len(b)+1)
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	out.Set("Content-Type", "application/json")
	return out
}
