// Package ingress reads the gateway's request headers. Each x-gateway-*
// header is also accepted under the x-portkey-* prefix so applications
// written against that SDK work unchanged; the prefix the client used is
// remembered so response headers can be echoed under it too.
package ingress

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
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

// Bounds on header values. A value beyond them is a 400 naming the header;
// no error message ever quotes a header value.
const (
	// MaxRequestTimeoutMS is the largest x-gateway-request-timeout: 24
	// hours. Larger values would overflow time.Duration (about 9.2e12 ms)
	// into an instant timeout, and no LLM call legitimately runs longer.
	MaxRequestTimeoutMS = 24 * 60 * 60 * 1000
	// MaxMetadataBytes bounds the x-gateway-metadata JSON object.
	MaxMetadataBytes = 16 << 10
	// MaxForwardHeaders bounds the names in x-gateway-forward-headers.
	MaxForwardHeaders = 64
	// MaxForwardHeadersBytes bounds the x-gateway-forward-headers value.
	MaxForwardHeadersBytes = 8 << 10
	// MaxTraceIDBytes bounds x-gateway-trace-id, which is echoed in every
	// response and log line of the request.
	MaxTraceIDBytes = 256
	// MaxSlugBytes bounds x-gateway-provider (a provider slug).
	MaxSlugBytes = 64
	// MaxVirtualKeyBytes bounds x-gateway-virtual-key (a virtual key name).
	MaxVirtualKeyBytes = 128
)

// Headers is what the client said in its gateway headers. It is parsed
// once per request and never holds anything but the client's own values.
type Headers struct {
	// APIKey is the gateway key: x-gateway-api-key, else the client's
	// own API key (see clientKey); KeyFrom says which.
	APIKey  string
	KeyFrom string
	// Authorization is the provider token, "Bearer " stripped: the
	// Authorization or x-api-key header that is not the gateway key.
	Authorization  string
	Provider       string
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

// canonical caches both prefixed, canonicalised forms of every header name
// so lookups on the hot path index the header map without allocating.
var canonical = map[string][2]string{}

// names lists every gateway header Parse reads; slots maps the canonical
// form of each, without its prefix ("Api-Key"), to its index in names, so
// Parse finds them all in one pass over the request's headers.
var (
	names = []string{APIKey, Provider, VirtualKey, Config, CustomHost, TraceID, Metadata,
		CacheForceRefresh, CacheNamespace, RequestTimeout, ForwardHeaders,
		CloudBResourceName, CloudBDeploymentID, CloudBAPIVersion, CloudBModelName,
		CloudCProjectID, CloudCRegion, CloudAAccessKeyID, CloudASecretKey,
		CloudASessionToken, CloudARegion}
	slots = map[string]int{}
)

// Canonical prefixes as they appear in a parsed http.Header.
var (
	canonicalPrefix      = http.CanonicalHeaderKey(Prefix + "x")[:len(Prefix)]
	canonicalAliasPrefix = http.CanonicalHeaderKey(AliasPrefix + "x")[:len(AliasPrefix)]
)

func init() {
	if len(names) != numNames || len(cloudFields) != numNames-slotFirstCloud {
		panic("ingress: names, slots and cloudFields disagree")
	}
	for i, n := range names {
		canonical[n] = [2]string{http.CanonicalHeaderKey(Prefix + n), http.CanonicalHeaderKey(AliasPrefix + n)}
		slots[canonical[n][0][len(Prefix):]] = i
	}
}

// values are the gateway headers of one request by slot: [0] under the
// x-gateway-* prefix, [1] under x-portkey-*.
type values [numNames][2]string

// Slots of the headers Parse reads, in the order of names; the cloud
// headers follow from slotFirstCloud.
const (
	slotAPIKey = iota
	slotProvider
	slotVirtualKey
	slotConfig
	slotCustomHost
	slotTraceID
	slotMetadata
	slotCacheForceRefresh
	slotCacheNamespace
	slotRequestTimeout
	slotForwardHeaders
	slotFirstCloud
	numNames = slotFirstCloud + 10
)

// collect reads every gateway header of h in one pass: a request carries
// a handful of headers, while the gateway knows over twenty names under
// two prefixes, so walking h beats looking each name up.
func collect(h http.Header, v *values) {
	for k, vs := range h {
		if len(k) <= len(Prefix) || len(vs) == 0 {
			continue
		}
		alias := 0
		switch k[:len(Prefix)] {
		case canonicalPrefix:
		case canonicalAliasPrefix:
			alias = 1
		default:
			continue
		}
		if i, ok := slots[k[len(Prefix):]]; ok {
			(*v)[i][alias] = vs[0]
		}
	}
}

// Get returns the value of a gateway header under either prefix; the
// x-gateway-* form wins when both are present. alias reports whether the
// value came from the x-portkey-* form.
func Get(h http.Header, name string) (v string, alias bool) {
	keys, ok := canonical[name]
	if !ok {
		keys = [2]string{http.CanonicalHeaderKey(Prefix + name), http.CanonicalHeaderKey(AliasPrefix + name)}
	}
	if vs := h[keys[0]]; len(vs) > 0 && vs[0] != "" {
		return vs[0], false
	}
	if vs := h[keys[1]]; len(vs) > 0 && vs[0] != "" {
		return vs[0], true
	}
	return "", false
}

// Parse reads all gateway headers. It rejects malformed values with a 400
// naming the header; it never checks credentials (that is the app's job).
func Parse(h http.Header) (*Headers, error) {
	out := new(Headers)
	var vals values
	collect(h, &vals)
	get := func(slot int) string {
		// The x-gateway-* form wins.
		v := &vals[slot]
		if v[0] != "" {
			return strings.TrimSpace(v[0])
		}
		if v[1] != "" {
			out.Alias = true
		}
		return strings.TrimSpace(v[1])
	}
	out.APIKey = get(slotAPIKey)
	out.Provider = get(slotProvider)
	if out.Provider != "" && !isName(out.Provider, MaxSlugBytes) {
		return nil, apierror.BadRequest(Prefix+Provider, "header %s%s must be a provider slug (at most %d letters, digits, '-', '_', '.')", Prefix, Provider, MaxSlugBytes)
	}
	if hasUpper(out.Provider) {
		out.Provider = strings.ToLower(out.Provider)
	}
	out.VirtualKey = get(slotVirtualKey)
	if out.VirtualKey != "" && !isName(out.VirtualKey, MaxVirtualKeyBytes) {
		return nil, apierror.BadRequest(Prefix+VirtualKey, "header %s%s must be a virtual key name (at most %d letters, digits, '-', '_', '.', ':')", Prefix, VirtualKey, MaxVirtualKeyBytes)
	}
	out.Config = get(slotConfig)
	out.CustomHost = get(slotCustomHost)
	out.TraceID = get(slotTraceID)
	if len(out.TraceID) > MaxTraceIDBytes {
		return nil, apierror.BadRequest(Prefix+TraceID, "header %s%s must be at most %d bytes", Prefix, TraceID, MaxTraceIDBytes)
	}
	out.CacheNamespace = get(slotCacheNamespace)
	var bearer, xKey string
	if vs := h["Authorization"]; len(vs) > 0 {
		bearer = BearerToken(vs[0])
	}
	if vs := h["X-Api-Key"]; len(vs) > 0 {
		xKey = strings.TrimSpace(vs[0])
	}
	from := KeyFromHeader
	if out.APIKey == "" {
		out.APIKey, from = clientKey(bearer, xKey)
	}
	out.KeyFrom = from
	switch {
	case from == KeyFromAuthorization:
		// The other of the two is the provider's key, unless it has a
		// gateway key's form.
		if !keys.IsKey(xKey) {
			out.Authorization = xKey
		}
	case from == KeyFromXAPIKey:
		out.Authorization = bearer
	case bearer != "":
		out.Authorization = bearer
	case !keys.IsKey(xKey):
		// A gateway key's form is never a provider key.
		out.Authorization = xKey
	}
	if from == KeyFromXAPIKey || (xKey != "" && keys.IsKey(xKey)) {
		// The gateway key moves to the gateway's own header, which no
		// call forwards (x-api-key is passed through to a provider), and
		// which a later Parse of the same request, the rate limiter's
		// and the gateway's, reads alike.
		if from == KeyFromXAPIKey {
			h[canonicalAPIKey] = []string{xKey}
		}
		delete(h, "X-Api-Key")
	}

	if md := get(slotMetadata); md != "" {
		m, err := parseMetadata(md)
		if err != nil {
			return nil, err
		}
		out.Metadata, out.MetadataRaw = m, md
	}
	if v := get(slotCacheForceRefresh); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, apierror.BadRequest(Prefix+CacheForceRefresh, "header %s%s must be true or false", Prefix, CacheForceRefresh)
		}
		out.ForceRefresh = b
	}
	if v := get(slotRequestTimeout); v != "" {
		ms, err := ParseTimeoutMS(v)
		if err != nil {
			return nil, err
		}
		out.RequestTimeoutMS = ms
	}
	if v := get(slotForwardHeaders); v != "" {
		fh, err := parseList(v)
		if err != nil {
			return nil, apierror.BadRequest(Prefix+ForwardHeaders, "header %s%s must be a comma-separated list or a JSON array of at most %d header names (%d bytes)", Prefix, ForwardHeaders, MaxForwardHeaders, MaxForwardHeadersBytes)
		}
		out.ForwardHeaders = fh
	}
	for i := slotFirstCloud; i < numNames; i++ {
		if v := get(i); v != "" {
			if out.Cloud == nil {
				out.Cloud = make(map[string]string, 4)
			}
			out.Cloud[cloudFields[names[i]]] = v
		}
	}
	return out, nil
}

// Where Headers.APIKey was found.
const (
	// KeyFromHeader: the x-gateway-api-key (or x-portkey-api-key)
	// header, or no key at all.
	KeyFromHeader = ""
	// KeyFromAuthorization: the Authorization bearer token.
	KeyFromAuthorization = "authorization"
	// KeyFromXAPIKey: the x-api-key header (Anthropic's clients).
	KeyFromXAPIKey = "x-api-key"
)

// clientKey picks the gateway key of a request that sent no
// x-gateway-api-key from the two headers clients send their one API key
// in: a key in the API's gw- form wherever it is, else the bearer token,
// else x-api-key. A client that knows only a base URL and a key (an
// OpenAI SDK, Claude Code) authenticates with the gateway key itself,
// whatever its origin (a Caddyfile key such as dev-key, or one the API
// issued), and the route (the key's defaults, a virtual key or config
// header) supplies the provider's key. A provider key of the client's own
// is sent beside x-gateway-api-key, never instead of it.
func clientKey(bearer, xKey string) (string, string) {
	switch {
	case keys.IsKey(bearer):
		return bearer, KeyFromAuthorization
	case keys.IsKey(xKey):
		return xKey, KeyFromXAPIKey
	case bearer != "":
		return bearer, KeyFromAuthorization
	case xKey != "":
		return xKey, KeyFromXAPIKey
	}
	return "", KeyFromHeader
}

// GatewayKey returns the gateway key of a request as Parse reads it: the
// x-gateway-api-key header, else the client's own API key (clientKey).
// It changes nothing in h.
func GatewayKey(h http.Header) string {
	if k, _ := Get(h, APIKey); k != "" {
		return strings.TrimSpace(k)
	}
	var bearer, xKey string
	if vs := h["Authorization"]; len(vs) > 0 {
		bearer = BearerToken(vs[0])
	}
	if vs := h["X-Api-Key"]; len(vs) > 0 {
		xKey = strings.TrimSpace(vs[0])
	}
	k, _ := clientKey(bearer, xKey)
	return k
}

// AsProviderKey reads the headers of a request whose caller is already
// known (a managed batch line runs as its creator, and its stored headers
// hold no gateway key) the way they would read beside an
// x-gateway-api-key: the token Parse took as the gateway key
// (KeyFromAuthorization or KeyFromXAPIKey) is the provider's key again.
// h is the request's header, which Parse changed.
func (hd *Headers) AsProviderKey(h http.Header) {
	switch hd.KeyFrom {
	case KeyFromAuthorization:
		hd.Authorization = hd.APIKey
	case KeyFromXAPIKey:
		h["X-Api-Key"] = []string{hd.APIKey}
		delete(h, canonicalAPIKey)
		if hd.Authorization == "" {
			hd.Authorization = hd.APIKey
		}
	default:
		return
	}
	hd.APIKey, hd.KeyFrom = "", KeyFromHeader
}

// canonicalAPIKey is the gateway key header's name in a parsed header.
var canonicalAPIKey = http.CanonicalHeaderKey(Prefix + APIKey)

// BearerToken strips an optional "Bearer " scheme from an Authorization
// value, so a bare token works as well.
func BearerToken(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return v
}

// ParseTimeoutMS reads an x-gateway-request-timeout value: a positive
// integer of milliseconds up to MaxRequestTimeoutMS. Anything else is a
// 400 naming the header and the bound.
func ParseTimeoutMS(v string) (int64, error) {
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms <= 0 || ms > MaxRequestTimeoutMS {
		return 0, apierror.BadRequest(Prefix+RequestTimeout, "header %s%s must be a positive integer of milliseconds, at most %d (24 hours)", Prefix, RequestTimeout, MaxRequestTimeoutMS)
	}
	return ms, nil
}

// ParseMetadata reads an x-gateway-metadata value: a JSON object of at
// most MaxMetadataBytes, nested at most jsonlimit.MaxDepth levels (checked
// without recursion before gjson walks it). String values are kept as
// they are, other values as their JSON text, nulls dropped.
func ParseMetadata(v string) (map[string]string, error) {
	return parseMetadata(strings.TrimSpace(v))
}

func parseMetadata(v string) (map[string]string, error) {
	if len(v) > MaxMetadataBytes || jsonlimit.Check([]byte(v)) != nil {
		return nil, badMetadata()
	}
	obj := gjson.Parse(v)
	if !obj.IsObject() {
		return nil, badMetadata()
	}
	m := make(map[string]string, 4)
	obj.ForEach(func(k, val gjson.Result) bool {
		switch val.Type {
		case gjson.Null:
		case gjson.String:
			m[k.String()] = val.Str
		default:
			m[k.String()] = val.Raw
		}
		return true
	})
	return m, nil
}

func badMetadata() error {
	return apierror.BadRequest(Prefix+Metadata, "header %s%s must be a JSON object of at most %d bytes, nested at most %d levels", Prefix, Metadata, MaxMetadataBytes, jsonlimit.MaxDepth)
}

var errList = errors.New("bad header list")

// parseList reads a comma-separated list or a JSON array of header names,
// bounded in size and count; every name must be an HTTP token.
func parseList(v string) ([]string, error) {
	if len(v) > MaxForwardHeadersBytes {
		return nil, errList
	}
	var out []string
	if strings.HasPrefix(v, "[") {
		if jsonlimit.CheckDepth([]byte(v), 1) != nil {
			return nil, errList
		}
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return nil, err
		}
	} else {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	if len(out) > MaxForwardHeaders {
		return nil, errList
	}
	for _, name := range out {
		if !isToken(name) {
			return nil, errList
		}
	}
	return out, nil
}

// isToken reports whether s is an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// isName reports whether s is a slug or record name: at most max letters,
// digits, '-', '_', '.' or ':'.
func isName(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// IsGatewayHeader reports whether name (any case) is one of the gateway's
// own request headers, which are never forwarded upstream.
func IsGatewayHeader(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, Prefix) || strings.HasPrefix(n, AliasPrefix)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
