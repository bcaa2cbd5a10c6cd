package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Token counts. POST /v1/responses/input_tokens (OpenAI's) and POST
// /v1/messages/count_tokens (Anthropic's, messages.go) are answered for
// every provider: by the provider's own count endpoint where the route
// has a target that has one (OpenAI's input_tokens, passed through;
// Anthropic's, Bedrock's and Vertex AI's count_tokens for Claude, and
// Gemini's countTokens on the Gemini API and Vertex AI), else
// by the gateway, counting with OpenAI's tokenizers (tokenest.Count, the
// count token preflight uses) and marking the answer an estimate
// (x-gateway-token-estimate: true). Either way the route is resolved as
// every request's is (its config, virtual keys and workspace), and the
// caller's key must be allowed the model asked for and each target's.

// inputTokensPath is OpenAI's Responses token count, after /v1.
const inputTokensPath = "/responses/input_tokens"

// countLocally returns the input tokens of a request body for model, as
// the gateway counts them when no provider does.
func countLocally(body []byte, model string) int64 {
	return tokenest.Count(body, tokenest.EncodingFor(model), 0)
}

// responsesInputTokens answers POST /v1/responses/input_tokens when no
// target of the route is OpenAI's (whose endpoint it is: the request is
// then routed and passed through), in OpenAI's shape:
// {"object":"response.input_tokens","input_tokens":N}.
func (g *Gateway) responsesInputTokens(_ *http.Request, q *Request) (*localAnswer, error) {
	c := &q.Call
	if c.Op != providers.OpProxy || c.Method != http.MethodPost || c.Path != inputTokensPath {
		return nil, nil
	}
	if err := checkJSONObject(c.Body); err != nil {
		return nil, err
	}
	model, _ := readModelStream(c.Body)
	p, err := g.routePlan(q)
	if err != nil {
		return nil, err
	}
	if err := countAllowed(q, p, model); err != nil {
		return nil, err
	}
	for _, t := range p.Leaves {
		if t.Settings.Provider == "openai" {
			return nil, nil
		}
	}
	body := strconv.AppendInt([]byte(`{"object":"response.input_tokens","input_tokens":`), countLocally(c.Body, model), 10)
	body = append(body, '}')
	return &localAnswer{op: providers.OpProxy, held: &heldAnswer{
		status: http.StatusOK,
		header: http.Header{"Content-Type": {"application/json"}, HeaderTokenEstimate: {"true"}},
		body:   body,
	}}, nil
}

// countAllowed applies the caller's key's model allow-list to a token
// count: the model the client named and every model a target would be
// asked for (its override_params.model), as refuseModels does for the
// calls it plans.
func countAllowed(q *Request, p *routing.Plan, model string) error {
	if q.Identity == nil || len(q.Identity.AllowedModels) == 0 {
		return nil
	}
	allowed := q.Identity.AllowedModels
	if model != "" && !identity.ModelAllowed(allowed, model) {
		return modelNotAllowed(model)
	}
	for _, t := range p.Leaves {
		var m string
		if raw, ok := t.OverrideParams["model"]; ok && json.Unmarshal(raw, &m) == nil && m != "" && !identity.ModelAllowed(allowed, m) {
			return modelNotAllowed(m)
		}
	}
	return nil
}
