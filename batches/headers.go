package batches

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// persistable are the routing headers a batch record may keep in storage:
// they name things (providers, virtual keys, saved configs, cloud
// resources and regions) or shape the call (the Anthropic version and
// betas the provider adapter forwards) but hold no secret. Both prefixes
// the gateway accepts are listed.
var persistable = map[string]bool{"anthropic-version": true, "anthropic-beta": true}

// secret are the headers the line runner needs that hold a credential the
// gateway must not store: a batch created with one runs from memory and
// cannot resume after a restart.
var secret = map[string]bool{"authorization": true, "api-key": true, "x-api-key": true}

func init() {
	for _, p := range []string{"x-gateway-", "x-portkey-"} {
		for _, n := range []string{"provider", "virtual-key", "config", "metadata", "trace-id", "cache-namespace",
			"cache-force-refresh", "request-timeout", "custom-host", "forward-headers",
			"cloudb-resource-name", "cloudb-deployment-id", "cloudb-api-version", "cloudb-model-name",
			"cloudc-project-id", "cloudc-region", "clouda-region"} {
			persistable[p+n] = true
		}
		for _, n := range []string{"clouda-access-key-id", "clouda-secret-access-key", "clouda-session-token",
			"cloudc-service-account-json"} {
			secret[p+n] = true
		}
	}
}

// SplitHeader divides the batch creation request's headers into those
// stored with the record (routing names, no secrets) and those held only
// in memory (credentials the line runner needs); every other header is
// dropped, because no line needs it: user agents, Accept, SDK headers
// (X-Stainless-*), cookies, the gateway key (each line runs as Caller)
// and gateway headers the gateway does not read. A config header counts as
// persistable only when it names a saved config; an inline JSON config can
// hold credentials, and so can a custom host URL with userinfo
// (https://user:pass@host) or a query. Authorization holding a gateway key
// (keys.KeyPrefix, the same value as x-gateway-api-key, or any value when
// no x-gateway-api-key was sent, see ingress.GatewayKey) is the caller's
// own authentication, not a provider key, and is dropped too, as is any
// Authorization of a request that names a virtual key and no config: the
// router then takes the provider key from the virtual key and never reads
// Authorization (routing.finishTarget), and SDKs always send one. Headers named by x-gateway-forward-headers are sent
// upstream by value, so they are held in memory as secrets may be.
func SplitHeader(h http.Header) (persist, memory http.Header) {
	persist, memory = http.Header{}, http.Header{}
	forwarded := forwardedNames(h)
	for k, vs := range h {
		lk := strings.ToLower(k)
		ck := http.CanonicalHeaderKey(k)
		switch {
		case lk == "authorization" && unusedAuthorization(h, vs):
		case secret[lk] || forwarded[lk] ||
			(strings.HasSuffix(lk, "-config") && persistable[lk] && inlineConfig(vs)) ||
			(strings.HasSuffix(lk, "-custom-host") && persistable[lk] && credentialURL(vs)):
			memory[ck] = append([]string(nil), vs...)
		case persistable[lk]:
			persist[ck] = append([]string(nil), vs...)
		}
	}
	return persist, memory
}

// forwardedNames lists, in lower case, the headers the request asks to be
// forwarded upstream (x-gateway-forward-headers, comma-separated).
func forwardedNames(h http.Header) map[string]bool {
	v, _ := ingress.Get(h, ingress.ForwardHeaders)
	if v == "" {
		return nil
	}
	out := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			out[n] = true
		}
	}
	return out
}

// unusedAuthorization reports whether the Authorization values vs of h
// are no provider key a line would use: a gateway key, or any value when
// a virtual key routes the request without a config.
func unusedAuthorization(h http.Header, vs []string) bool {
	vk, _ := ingress.Get(h, ingress.VirtualKey)
	cfg, _ := ingress.Get(h, ingress.Config)
	if vk != "" && cfg == "" {
		return true
	}
	gk, _ := ingress.Get(h, ingress.APIKey)
	if gk == "" {
		// Without x-gateway-api-key the client's API key is the gateway
		// key (ingress.GatewayKey): the creator's own, never a
		// provider's.
		return len(vs) > 0
	}
	for _, v := range vs {
		tok := ingress.BearerToken(v)
		if !strings.HasPrefix(tok, keys.KeyPrefix) && (gk == "" || tok != gk) {
			return false
		}
	}
	return len(vs) > 0
}

// Unresumable names the headers of h that keep a batch created with them
// from resuming after a restart (sorted, lower case; values never), for
// the creation answer's x-gateway-batch-resumable header and logs.
func Unresumable(h http.Header) []string {
	_, memory := SplitHeader(h)
	out := make([]string, 0, len(memory))
	for k := range memory {
		out = append(out, strings.ToLower(k))
	}
	slices.Sort(out)
	return out
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
