// Package azure registers Microsoft's two OpenAI-format providers:
//
//   - "azure-openai": Azure OpenAI, OpenAI's API on per-resource hosts
//     (https://{resource_name}.openai.azure.com) with deployments in the
//     path and an api-version query parameter, or the version-less /openai/v1
//     API.
//   - "azure-ai": Azure AI Foundry models (serverless API and managed
//     compute endpoints, and a Foundry resource's /models endpoint), which
//     speak the same format on other hosts.
//
// Both answer in OpenAI's format, streams included, so neither translates
// responses: bodies pass through with only the URL and auth changed, and
// OpenAI's request fields are passed through as sent.
//
// Authentication rule (both providers): the key in api_key (from the
// settings, a virtual key, or the client's Authorization: Bearer header)
// is sent as a Microsoft Entra ID bearer token (Authorization: Bearer)
// when it looks like a JWT — three base64url segments, the first one
// decoding to a JSON header — and otherwise as a resource key: the api-key
// header for Azure OpenAI and Foundry resources, Authorization: Bearer for
// serverless and managed endpoints, which document the key as a bearer
// token.
package azure

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Provider slugs.
const (
	SlugOpenAI = "azure-openai"
	SlugAI     = "azure-ai"
)

func init() {
	providers.Register(SlugOpenAI, OpenAI{})
	providers.Register(SlugAI, AI{})
}

// LooksLikeJWT reports whether key has a JWT's shape: Entra ID access
// tokens do, Azure resource keys (32 hex or 84 base62 characters) never
// do.
func LooksLikeJWT(key string) bool {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	hdr, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	return err == nil && jsonlimit.Check(hdr) == nil && gjson.GetBytes(hdr, "alg").Exists()
}

// missingKey is the 401 for a request without any Azure credential.
func missingKey(slug string) error {
	return providers.MissingKey(slug, "send the resource key (or an Entra ID token) as Authorization: Bearer, or set api_key in a config or virtual key")
}

// setAuth applies the package's authentication rule. keyHeader is the
// header a resource key travels in ("api-key"), or "" for Bearer.
func setAuth(h http.Header, key, keyHeader string) {
	if keyHeader == "" || LooksLikeJWT(key) {
		h.Set("Authorization", "Bearer "+key)
		return
	}
	h.Set(keyHeader, key)
}

// withModelName sets the body's model from the x-gateway-cloudb-model-name
// header, for deployments and endpoints that serve several models. Only
// JSON bodies are touched; multipart audio uploads are sent as they are.
func withModelName(c *providers.Call, s *providers.Settings, body []byte) []byte {
	if s.CloudBModelName == "" || len(body) == 0 || jsonlimit.Check(body) != nil || !gjson.ParseBytes(body).IsObject() {
		return body
	}
	if b, err := sjson.SetBytes(body, "model", s.CloudBModelName); err == nil {
		c.Model = s.CloudBModelName
		return b
	}
	return body
}

// hostLabel checks a value that becomes part of a host name (a resource
// or endpoint name, a region), so a header cannot redirect the request to
// another host.
func hostLabel(field, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 || v[0] == '-' || v[len(v)-1] == '-' {
		return apierror.BadRequest(field, "invalid %s %q: not a DNS label (1 to 63 letters, digits or inner '-')", field, v)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return apierror.BadRequest(field, "invalid %s %q: only letters, digits and '-' are allowed", field, v)
		}
	}
	return nil
}

// mergeQuery returns the client's query with api-version set, or removed
// when version is "".
func mergeQuery(raw, version string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		q = url.Values{}
	}
	if version == "" {
		q.Del("api-version")
	} else {
		q.Set("api-version", version)
	}
	return q.Encode()
}
