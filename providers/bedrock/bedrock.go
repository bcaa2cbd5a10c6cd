// Package bedrock registers the Amazon Bedrock provider ("bedrock").
//
// Chat completions go through the Converse API (POST /model/{id}/converse,
// and /converse-stream whose binary event stream is translated to OpenAI
// chunks); Anthropic Messages API calls to Claude models through
// InvokeModel (messages.go) and their count_tokens through CountTokens
// (counttokens.go); embeddings go through InvokeModel for the Titan and Cohere
// embedding models; any other client path is passed through to
// bedrock-runtime unchanged but signed. Requests are signed with SigV4 from
// the clouda_* settings or, when only api_key is set, carry a Bedrock API
// key as a bearer token.
package bedrock

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Slug is the provider name clients use.
const Slug = "bedrock"

// DefaultRegion is used when no clouda_region is given, as AWS SDKs and
// the reference gateway do.
const DefaultRegion = "us-east-1"

// signingService is the SigV4 service name of bedrock-runtime.
const signingService = "bedrock"

const (
	contentJSON        = "application/json"
	contentEventStream = "application/vnd.amazon.eventstream"
)

// regionPattern keeps a header-given region from turning the host name
// into something else ("evil.example#"): regions are lower-case words and
// digits joined by dashes.
var regionPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func init() {
	providers.Register(Slug, New())
}

// Provider implements providers.Provider for Amazon Bedrock.
type Provider struct {
	// now is the signing clock; tests replace it.
	now func() time.Time
}

// New returns a Bedrock provider that signs with the current time.
func New() *Provider {
	return &Provider{now: time.Now}
}

// Prepare implements providers.Provider: it translates the body for the
// operation, picks the bedrock-runtime path and authenticates the request.
func (p *Provider) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	region, err := regionOf(s)
	if err != nil {
		return err
	}
	if s.CloudAAccessKeyID == "" && s.APIKey == "" {
		return providers.MissingKey(Slug, "set clouda_access_key_id and clouda_secret_access_key, or a Bedrock API key as api_key")
	}
	if s.CloudAAccessKeyID != "" && s.CloudASecretAccessKey == "" {
		return providers.MissingKey(Slug, "clouda_access_key_id is set but clouda_secret_access_key is missing")
	}
	base, err := baseURL(s.CustomHost, region)
	if err != nil {
		return err
	}
	method, body := http.MethodPost, c.Body
	var path, rawPath, accept, contentType = "", "", contentJSON, contentJSON
	switch c.Op {
	case providers.OpChat:
		if c.Model == "" {
			return apierror.BadRequest("model", "model is required: the Bedrock model id, inference profile id or ARN")
		}
		if body, err = ConverseRequest(c.Body); err != nil {
			return err
		}
		action := "/converse"
		if c.Stream {
			action, accept = "/converse-stream", contentEventStream
		}
		path, rawPath = modelPath(c.Model, action)
	case providers.OpMessages:
		if body, err = messagesRequest(c); err != nil {
			return err
		}
		action := "/invoke"
		if c.Stream {
			action, accept = "/invoke-with-response-stream", contentEventStream
		}
		path, rawPath = modelPath(c.Model, action)
	case providers.OpCountTokens:
		if body, err = countTokensRequest(c); err != nil {
			return err
		}
		c.Stream = false
		path, rawPath = modelPath(foundationModel(c.Model), "/count-tokens")
	case providers.OpEmbeddings:
		if c.Model == "" {
			return apierror.BadRequest("model", "model is required: a Titan or Cohere embedding model id")
		}
		if body, err = EmbedRequest(c.Model, c.Body); err != nil {
			return err
		}
		// InvokeModel answers embeddings as one JSON body, whatever a
		// stray "stream" field in the request said.
		c.Stream = false
		path, rawPath = modelPath(c.Model, "/invoke")
	case providers.OpProxy:
		// A native Bedrock call (InvokeModel, ApplyGuardrail, …): the
		// client speaks Bedrock's own format, the gateway only signs it.
		method, path = c.Method, c.Path
		rawPath = (&url.URL{Path: c.Path}).EscapedPath()
		accept = c.Header.Get("Accept")
		contentType = c.Header.Get("Content-Type")
	default:
		return apierror.BadRequest("", "provider bedrock does not support %s: use /chat/completions, /embeddings, or a native bedrock-runtime path", c.Op).WithCode("unsupported_operation")
	}

	target := *base
	target.Path = strings.TrimRight(base.Path, "/") + path
	target.RawPath = strings.TrimRight(base.EscapedPath(), "/") + rawPath
	target.RawQuery = c.RawQuery
	if c.Op != providers.OpProxy {
		target.RawQuery = ""
	}
	u.Method, u.URL, u.Body = method, &target, body
	if contentType != "" {
		u.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		u.Header.Set("Accept", accept)
	}
	if s.CloudAAccessKeyID == "" {
		u.Header.Set("Authorization", "Bearer "+s.APIKey)
		return nil
	}
	return p.Sign(u, s, region)
}

// Translator implements providers.Provider: chat and embeddings are
// translated; passed-through native calls are answered in Bedrock's own
// format.
func (p *Provider) Translator(op providers.Operation) providers.Translator {
	switch op {
	case providers.OpChat:
		return chatTranslator{}
	case providers.OpEmbeddings:
		return embedTranslator{}
	case providers.OpMessages:
		return messagesTranslator{}
	case providers.OpCountTokens:
		return countTranslator{}
	}
	return nil
}

// regionOf is s's clouda_region, DefaultRegion when none is set.
func regionOf(s *providers.Settings) (string, error) {
	region := s.CloudARegion
	if region == "" {
		region = DefaultRegion
	}
	if len(region) > 63 || !regionPattern.MatchString(region) {
		return "", apierror.BadRequest("clouda_region", "invalid clouda_region %q: expected an AWS region such as us-east-1", region)
	}
	return region, nil
}

// baseURL is https://bedrock-runtime.{region}.amazonaws.com, or the
// custom_host's scheme, host and path prefix.
func baseURL(customHost, region string) (*url.URL, error) {
	if customHost == "" {
		return &url.URL{Scheme: "https", Host: "bedrock-runtime." + region + ".amazonaws.com"}, nil
	}
	// The signature covers the Host header: CustomBase drops a default
	// port, so the signed Host is the one the transport sends.
	return providers.CustomBase(customHost, "")
}

// modelPath returns the decoded and the escaped form of
// /model/{modelId}{action}. Model ids and ARNs contain ':' and '/', which
// must travel escaped (%3A, %2F) as AWS SDKs send them; the signer then
// escapes the escaped path once more, as SigV4 requires for every service
// but S3.
func modelPath(model, action string) (path, raw string) {
	return "/model/" + model + action, "/model/" + EscapeModelID(model) + action
}

// EscapeModelID percent-encodes everything in a model id but RFC 3986's
// unreserved characters, like the AWS SDKs' path binding.
func EscapeModelID(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(id) + 8)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
