// Package ingress reads the gateway's request headers. Each x-gateway-*
// header is also accepted under the x-portkey-* prefix so applications
// written against that SDK work unchanged; the prefix the client used is
// remembered so response headers can be echoed under it too.
package ingress

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Prefixes accepted for gateway headers.
const (
	Prefix      = "x-gateway-"
	AliasPrefix = "x-portkey-"
)

// Header names without their prefix.
const (
	APIKey            = "api-key"
	Provider          = "provider"
	VirtualKey        = "virtual-key"
	Config            = "config"
	CustomHost        = "custom-host"
	TraceID           = "trace-id"
	Metadata          = "metadata"
	CacheForceRefresh = "cache-force-refresh"
	CacheNamespace    = "cache-namespace"
	RequestTimeout    = "request-timeout"
	ForwardHeaders    = "forward-headers"

	CloudBResourceName = "cloudb-resource-name"
	CloudBDeploymentID = "cloudb-deployment-id"
	CloudBAPIVersion   = "cloudb-api-version"
	CloudBModelName    = "cloudb-model-name"
	CloudCProjectID    = "cloudc-project-id"
	CloudCRegion       = "cloudc-region"
	CloudAAccessKeyID  = "clouda-access-key-id"
	CloudASecretKey    = "clouda-secret-access-key"
	CloudASessionToken = "clouda-session-token"
	CloudARegion       = "clouda-region"
)

// Headers is what the client said in its gateway headers. It is parsed
// once per request and never holds anything but the client's own values.
type Headers struct {
	APIKey         string
	Provider       string
	Authorization  string // provider token, "Bearer " stripped
	VirtualKey     string
	Config         string // JSON object or saved config id
	CustomHost     string
	TraceID        string
	Metadata       map[string]string
	MetadataRaw    string
	ForceRefresh   bool
	CacheNamespace string
	// RequestTimeoutMS is 0 when the header is absent.
	RequestTimeoutMS int64
	ForwardHeaders   []string
	// Cloud holds the provider-specific cloud headers by spec field name
	// (cloudb_resource_name …) so they merge like config fields.
	Cloud map[string]string
	// Alias is true when the client used the x-portkey-* prefix.
	Alias bool
}

var cloudFields = map[string]string{
	CloudBResourceName: "resource_name",
	CloudBDeploymentID: "deployment_id",
	CloudBAPIVersion:   "api_version",
	CloudBModelName:    "cloudb_model_name",
	CloudCProjectID:    "cloudc_project_id",
	CloudCRegion:       "cloudc_region",
	CloudAAccessKeyID:  "clouda_access_key_id",
	CloudASecretKey:    "clouda_secret_access_key",
	CloudASessionToken: "clouda_session_token",
	CloudARegion:       "clouda_region",
}

// Get returns the value of a gateway header under either prefix; the
// x-gateway-* form wins when both are present. alias reports whether the
// value came from the x-portkey-* form.
func Get(h http.Header, name string) (v string, alias bool) {
	if v = h.Get(Prefix + name); v != "" {
		return v, false
	}
	if v = h.Get(AliasPrefix + name); v != "" {
		return v, true
	}
	return "", false
}

// Parse reads all gateway headers. It rejects malformed values with a 400
// naming the header; it never checks credentials (that is the app's job).
func Parse(h http.Header) (*Headers, error) {
	out := new(Headers)
	get := func(name string) string {
		v, alias := Get(h, name)
		if alias {
			out.Alias = true
		}
		return strings.TrimSpace(v)
	}
	out.APIKey = get(APIKey)
	out.Provider = strings.ToLower(get(Provider))
	out.VirtualKey = get(VirtualKey)
	out.Config = get(Config)
	out.CustomHost = get(CustomHost)
	out.TraceID = get(TraceID)
	out.CacheNamespace = get(CacheNamespace)
	out.Authorization = BearerToken(h.Get("Authorization"))

	if md := get(Metadata); md != "" {
		m, err := parseMetadata(md)
		if err != nil {
			return nil, err
		}
		out.Metadata, out.MetadataRaw = m, md
	}
	if v := get(CacheForceRefresh); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, apierror.BadRequest(Prefix+CacheForceRefresh, "header %s%s must be true or false", Prefix, CacheForceRefresh)
		}
		out.ForceRefresh = b
	}
	if v := get(RequestTimeout); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return nil, apierror.BadRequest(Prefix+RequestTimeout, "header %s%s must be a positive integer of milliseconds", Prefix, RequestTimeout)
		}
		out.RequestTimeoutMS = ms
	}
	if v := get(ForwardHeaders); v != "" {
		fh, err := parseList(v)
		if err != nil {
			return nil, apierror.BadRequest(Prefix+ForwardHeaders, "header %s%s must be a comma-separated list or a JSON array of header names", Prefix, ForwardHeaders)
		}
		out.ForwardHeaders = fh
	}
	for hdr, field := range cloudFields {
		if v := get(hdr); v != "" {
			if out.Cloud == nil {
				out.Cloud = make(map[string]string, 4)
			}
			out.Cloud[field] = v
		}
	}
	return out, nil
}

// BearerToken strips an optional "Bearer " scheme from an Authorization
// value, so a bare token works as well.
func BearerToken(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return v
}

func parseMetadata(v string) (map[string]string, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(v), &raw); err != nil || raw == nil {
		return nil, apierror.BadRequest(Prefix+Metadata, "header %s%s must be a JSON object", Prefix, Metadata)
	}
	m := make(map[string]string, len(raw))
	for k, val := range raw {
		switch t := val.(type) {
		case string:
			m[k] = t
		case nil:
		default:
			b, _ := json.Marshal(t)
			m[k] = string(b)
		}
	}
	return m, nil
}

func parseList(v string) ([]string, error) {
	if strings.HasPrefix(v, "[") {
		var out []string
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return nil, err
		}
		return out, nil
	}
	parts := strings.Split(v, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// IsGatewayHeader reports whether name (any case) is one of the gateway's
// own request headers, which are never forwarded upstream.
func IsGatewayHeader(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, Prefix) || strings.HasPrefix(n, AliasPrefix)
}
