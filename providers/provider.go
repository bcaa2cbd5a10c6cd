// Package providers defines how the gateway talks to one model provider:
// the upstream URL, authentication, and (for providers that do not speak
// OpenAI's wire format) the translation of requests, responses, streams and
// errors. OpenAI-compatible providers are rows of one table in
// providers/openaicompat; every other family has its own package.
package providers

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Operation is the API family a client request belongs to.
type Operation string

// Operations the gateway recognises by path; anything else is OpProxy.
const (
	OpChat           Operation = "chat.completions"
	OpCompletions    Operation = "completions"
	OpEmbeddings     Operation = "embeddings"
	OpImages         Operation = "images"
	OpSpeech         Operation = "audio.speech"
	OpTranscriptions Operation = "audio.transcriptions"
	OpTranslations   Operation = "audio.translations"
	OpModels         Operation = "models"
	OpResponses      Operation = "responses"
	// OpMessages is Anthropic's Messages API (POST /v1/messages): sent
	// as it is to targets that speak it, translated to chat for others.
	OpMessages Operation = "messages"
	// OpCountTokens is the Messages API's POST /v1/messages/count_tokens.
	OpCountTokens Operation = "messages.count_tokens"
	OpProxy       Operation = "proxy"
)

// OperationFor maps a client path (after the /v1 prefix) and method to its
// operation. Unknown paths are passed through as OpProxy.
func OperationFor(method, path string) Operation {
	switch {
	case method == http.MethodPost && path == "/chat/completions":
		return OpChat
	case method == http.MethodPost && path == "/completions":
		return OpCompletions
	case method == http.MethodPost && path == "/embeddings":
		return OpEmbeddings
	case method == http.MethodPost && strings.HasPrefix(path, "/images/"):
		return OpImages
	case method == http.MethodPost && path == "/audio/speech":
		return OpSpeech
	case method == http.MethodPost && path == "/audio/transcriptions":
		return OpTranscriptions
	case method == http.MethodPost && path == "/audio/translations":
		return OpTranslations
	case method == http.MethodGet && (path == "/models" || strings.HasPrefix(path, "/models/")):
		return OpModels
	case method == http.MethodPost && path == "/responses":
		return OpResponses
	case method == http.MethodPost && path == "/messages":
		return OpMessages
	case method == http.MethodPost && path == "/messages/count_tokens":
		return OpCountTokens
	}
	return OpProxy
}

// Call is what a provider needs to know about the client's request to build
// the upstream one. Body is the JSON (or multipart) body after
// override_params were merged.
type Call struct {
	Op       Operation
	Method   string
	Path     string // client path after /v1, e.g. "/chat/completions"
	RawQuery string
	Header   http.Header // the client's headers (read only)
	Body     []byte
	Model    string
	Stream   bool
	// UsageAdded is set by a provider that asked the upstream for usage in
	// a stream the client did not ask it for; the usage-only chunk is then
	// dropped before it reaches the client.
	UsageAdded bool
	// Egress, when set, dials any extra connection the provider makes for
	// this call (a service account's token endpoint) under the gateway's
	// egress policy. The gateway sets it when the target's outbound
	// addresses derive from client input; nil dials directly.
	Egress Dialer
}

// Dialer dials an outbound connection; *upstream.Guard implements it,
// refusing addresses the egress policy does not allow before connecting.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Upstream is the request a provider asks the gateway to send.
type Upstream struct {
	Method string
	URL    *url.URL
	// Header holds the headers the provider sets (auth, versions); they win
	// over anything copied from the client.
	Header http.Header
	Body   []byte
	// Tail, when set, is sent right after Body, which is then not the
	// whole request: a provider appends a few bytes to a large body
	// (StreamUsageParts) without copying it.
	Tail []byte
}

// Provider builds upstream requests for one provider family.
type Provider interface {
	// Prepare fills u (whose Header is non-nil) for the call and the
	// target's settings. Errors are *apierror.Error values.
	Prepare(c *Call, s *Settings, u *Upstream) error
	// Translator returns nil when the provider answers op in OpenAI's
	// format, which the gateway then passes through untouched.
	Translator(op Operation) Translator
}

// FieldDropper is implemented by providers whose API rejects fields it
// does not know, so their translation leaves out OpenAI fields that have no
// equivalent. The gateway logs, at debug level, which of these a request
// carried, so an operator can see why a parameter had no effect.
type FieldDropper interface {
	// DroppedFields lists the top-level OpenAI request fields the
	// translation of c leaves out.
	DroppedFields(c *Call) []string
}

// MessagesSpeaker is implemented by providers that take Anthropic's
// Messages API itself for some models (Anthropic, and Claude on Bedrock
// and Vertex AI): a /v1/messages call to such a target is sent as the
// client wrote it (op OpMessages, or OpCountTokens where the provider
// counts tokens), not translated to a chat completion.
type MessagesSpeaker interface {
	// SpeaksMessages reports whether op for model is sent natively.
	SpeaksMessages(op Operation, model string) bool
}

// Usage is the token usage a provider reported, in OpenAI's convention:
// PromptTokens counts every prompt token, including those read from
// (CachedTokens) and written to (CacheWriteTokens) the provider's prompt
// cache, which are priced apart; CompletionTokens includes
// ReasoningTokens.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	CachedTokens     int64 `json:"cached_tokens,omitempty"`
	// CacheWriteTokens are prompt tokens written to the prompt cache
	// (Anthropic's cache_creation_input_tokens, Bedrock's
	// cacheWriteInputTokens), which cost more than plain input.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
}

// Translator converts a non-OpenAI provider's answers to OpenAI's format.
type Translator interface {
	// Response converts a complete successful response body.
	Response(c *Call, body []byte) ([]byte, *Usage, error)
	// Error converts an error response body to the OpenAI envelope,
	// keeping the provider's message.
	Error(c *Call, status int, body []byte) []byte
	// Stream returns a converter that writes OpenAI SSE chunks to w as
	// provider stream bytes are written to it.
	Stream(c *Call, w io.Writer) StreamConverter
}

// StreamConverter receives a provider's stream bytes as they arrive.
type StreamConverter interface {
	io.Writer
	// Close is called when the upstream body ended cleanly; it writes any
	// final chunks and the terminating "data: [DONE]".
	Close() error
	// Usage returns the usage seen in the stream, if any.
	Usage() *Usage
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Provider{}
)

// Register adds a provider under its slug. It is called from init
// functions of the provider packages, like caddy.RegisterModule, and
// panics on a duplicate slug.
func Register(slug string, p Provider) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[slug]; dup {
		panic("providers: duplicate provider " + slug)
	}
	registry[slug] = p
}

// Lookup returns the provider registered under slug.
func Lookup(slug string) (Provider, bool) {
	registryMu.RLock()
	p, ok := registry[slug]
	registryMu.RUnlock()
	return p, ok
}

// Slugs lists the registered provider slugs, sorted.
func Slugs() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// JoinURL parses base and appends path and query, keeping any path the base
// already has ("https://api.groq.com/openai/v1" + "/chat/completions").
func JoinURL(base, path, rawQuery string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	return JoinParsedURL(u, path, rawQuery), nil
}

// JoinParsedURL is JoinURL for a base already parsed; it changes and
// returns u.
func JoinParsedURL(u *url.URL, path, rawQuery string) *url.URL {
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = rawQuery
	return u
}
