// Package vertex registers the "vertex-ai" provider: Gemini models on
// Vertex AI through the shared Gemini translation, Claude models through
// the Anthropic translation (Anthropic on Vertex), and text embeddings
// through :predict. It authenticates with a service account (an OAuth
// token cached per account) or an access token given as api_key.
package vertex

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
)

// Slug is the provider's name.
const Slug = "vertex-ai"

// DefaultRegion is used when cloudc_region is not set.
const DefaultRegion = "us-central1"

func init() {
	providers.Register(Slug, &provider{})
}

// provider is registered once per process, so its token cache outlives
// config reloads (see tokens).
type provider struct {
	tokens tokens
}

// Publisher says who serves a model on Vertex AI.
type Publisher string

// Publishers this provider translates for.
const (
	Google    Publisher = "google"
	Anthropic Publisher = "anthropic"
)

// SplitModel returns a model's publisher and id. "anthropic/claude-x" and
// "google/gemini-x" name the publisher; otherwise ids starting with
// "claude" are Anthropic's and the rest Google's.
func SplitModel(model string) (Publisher, string, error) {
	if pub, id, ok := strings.Cut(model, "/"); ok {
		switch Publisher(pub) {
		case Google, Anthropic:
			return Publisher(pub), id, nil
		}
		return "", "", apierror.BadRequest("model", "publisher %q is not supported on vertex-ai; use google/ or anthropic/ models", pub)
	}
	if strings.HasPrefix(model, "claude") {
		return Anthropic, model, nil
	}
	return Google, model, nil
}

// validRegion keeps the region, which becomes part of a host name, to
// the characters Google region names use.
func validRegion(r string) bool {
	if r == "" || len(r) > 63 || r[0] == '-' || r[len(r)-1] == '-' {
		return false
	}
	for _, c := range r {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// validProject allows project ids and domain-scoped ids (example.com:p).
func validProject(p string) bool {
	if p == "" || len(p) > 128 {
		return false
	}
	for _, c := range p {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}

// Prepare implements providers.Provider.
func (p *provider) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	region := s.CloudCRegion
	if region == "" {
		region = DefaultRegion
	}
	if !validRegion(region) {
		return apierror.BadRequest("cloudc_region", "cloudc_region %q is not a Google Cloud region", region)
	}
	host := "https://" + region + "-aiplatform.googleapis.com"
	if region == "global" {
		host = "https://aiplatform.googleapis.com"
	}
	base, err := providers.BaseURL(s.CustomHost, host, "")
	if err != nil {
		return err
	}
	token, project, err := p.credentials(s, c.Egress)
	if err != nil {
		return err
	}
	if s.CloudCProjectID != "" {
		project = s.CloudCProjectID
	}
	if !validProject(project) {
		return apierror.BadRequest("cloudc_project_id", "cloudc_project_id is required (or a service account JSON with project_id) and must be a project id")
	}
	location := "/v1/projects/" + project + "/locations/" + region
	path, query, body, method := location+c.Path, c.RawQuery, c.Body, c.Method
	switch c.Op {
	case providers.OpChat, providers.OpEmbeddings:
		if path, query, body, err = p.route(c, location); err != nil {
			return err
		}
		method = http.MethodPost
		u.Header.Set("Content-Type", "application/json")
	case providers.OpMessages, providers.OpCountTokens:
		if path, body, err = messagesRoute(c, location); err != nil {
			return err
		}
		method = http.MethodPost
		u.Header.Set("Content-Type", "application/json")
	case providers.OpProxy:
		// Other Vertex AI paths under the project and location.
	default:
		return oaiwire.Unsupported(Slug, "/v1"+c.Path)
	}
	u.URL = providers.JoinParsedURL(base, path, query)
	u.Method, u.Body = method, body
	u.Header.Set("Authorization", "Bearer "+token)
	if pub, _, _ := SplitModel(c.Model); pub == Anthropic {
		anthropic.SetHeaders(u.Header, c.Header, "", false)
	}
	return nil
}

// route builds the path, query and body of a chat or embeddings call.
func (p *provider) route(c *providers.Call, location string) (path, query string, body []byte, err error) {
	pub, model, err := SplitModel(c.Model)
	if err != nil {
		return "", "", nil, err
	}
	if model, err = gemini.Model(model); err != nil {
		return "", "", nil, err
	}
	prefix := location + "/publishers/" + string(pub) + "/models/" + model
	switch {
	case c.Op == providers.OpEmbeddings && pub == Google:
		body, err = buildPredict(c.Body)
		return prefix + ":predict", "", body, err
	case c.Op == providers.OpEmbeddings:
		return "", "", nil, oaiwire.Unsupported(Slug, "embeddings with Anthropic models")
	case pub == Anthropic:
		body, err = anthropic.BuildRequest(c.Body, anthropic.Options{Vertex: true, Stream: c.Stream})
		if c.Stream {
			return prefix + ":streamRawPredict", "", body, err
		}
		return prefix + ":rawPredict", "", body, err
	}
	suffix, query := gemini.ChatMethod(c.Stream)
	body, err = gemini.BuildRequest(c.Body)
	return prefix + suffix, query, body, err
}

// messagesVersion is the anthropic_version Vertex AI requires in a
// Messages body.
const messagesVersion = "vertex-2023-10-16"

// messagesRoute builds the path and body of a Messages API call to a
// Claude model: the client's body with the model moved to the URL; a
// count_tokens call goes to count-tokens:rawPredict.
func messagesRoute(c *providers.Call, location string) (path string, body []byte, err error) {
	pub, model, err := SplitModel(c.Model)
	if err != nil {
		return "", nil, err
	}
	if model, err = gemini.Model(model); err != nil {
		return "", nil, err
	}
	if pub != Anthropic && c.Op == providers.OpCountTokens {
		// Gemini's countTokens takes the generateContent members at
		// its top level (counttokens.go).
		c.Stream = false
		if body, err = gemini.CountContents(c.Body); err != nil {
			return "", nil, err
		}
		return location + "/publishers/" + string(pub) + "/models/" + model + ":countTokens", body, nil
	}
	if pub != Anthropic {
		return "", nil, oaiwire.Unsupported(Slug, "/v1/messages with a Gemini model (send it to /v1/chat/completions, or name a Claude model)")
	}
	if c.Op == providers.OpCountTokens {
		// Claude's token counting takes the Messages body with the
		// model in it (its bare id), at one URL for every model.
		c.Stream = false
		if body, err = countBody(c.Body, model); err != nil {
			return "", nil, err
		}
		return location + "/publishers/anthropic/models/count-tokens:rawPredict", body, nil
	}
	if body, err = anthropic.CloudBody(c.Body, messagesVersion); err != nil {
		return "", nil, err
	}
	path = location + "/publishers/anthropic/models/" + model + ":rawPredict"
	if c.Stream {
		path = location + "/publishers/anthropic/models/" + model + ":streamRawPredict"
	}
	return path, body, nil
}

// SpeaksMessages implements providers.MessagesSpeaker: Claude models take
// the Messages API and count_tokens on Vertex AI; Gemini models count
// tokens with countTokens (the body translated, counttokens.go).
func (p *provider) SpeaksMessages(op providers.Operation, model string) bool {
	pub, _, err := SplitModel(model)
	if err != nil {
		return false
	}
	return op == providers.OpCountTokens || op == providers.OpMessages && pub == Anthropic
}

// countBody is the count-tokens body of a count_tokens call: the
// client's, with the model's bare id (no "anthropic/" publisher) and
// Vertex AI's anthropic_version unless the client set one.
func countBody(body []byte, model string) ([]byte, error) {
	out, err := sjson.SetBytes(body, "model", model)
	if err == nil && !gjson.GetBytes(out, "anthropic_version").Exists() {
		out, err = sjson.SetBytes(out, "anthropic_version", messagesVersion)
	}
	if err != nil {
		return nil, apierror.BadRequest("", "the request body could not be prepared for vertex-ai: %v", err)
	}
	return out, nil
}

// credentials returns the bearer token and the service account's project.
func (p *provider) credentials(s *providers.Settings, egress providers.Dialer) (token, project string, err error) {
	if len(s.CloudCServiceAccountJSON) > 0 && string(s.CloudCServiceAccountJSON) != "null" {
		return p.tokens.token(s.CloudCServiceAccountJSON, egress)
	}
	if s.APIKey != "" {
		return s.APIKey, "", nil
	}
	return "", "", providers.MissingKey(Slug, "set cloudc_service_account_json, or send an access token as Authorization: Bearer <token>")
}

// Translator implements providers.Provider.
func (p *provider) Translator(op providers.Operation) providers.Translator {
	switch op {
	case providers.OpChat:
		return chat{}
	case providers.OpEmbeddings:
		return embeddings{}
	case providers.OpMessages:
		return claudeNative
	case providers.OpCountTokens:
		return countTokens{}
	}
	return nil
}

// claudeNative reads the usage of Messages API answers of Claude models;
// Google's error envelope is put in Anthropic's shape.
var claudeNative = anthropic.Native{Provider: Slug}

// claudeCount passes Claude's count-tokens answer, {"input_tokens":N},
// as it is.
var claudeCount = anthropic.CountTokens{Provider: Slug}
