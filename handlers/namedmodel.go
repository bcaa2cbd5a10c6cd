package handlers

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// A key limited to some models is held to them on every road, not only on
// the JSON APIs whose model the parse reads (inspectBody): a multipart
// upload (audio transcriptions and translations, image edits) names its
// model in a form field, a passed-through JSON API (moderations, fine
// tuning, a provider's own paths) in its body, and a provider-native path
// (Gemini's models/{m}:generateContent, Bedrock's model/{id}/invoke) in
// the URL. namedModel finds that model where the parse did not, so
// checkModel judges it; it runs only for a key with an allow-list, so
// other requests pay nothing.

// maxModelField bounds a multipart model field: a model name, never a
// file.
const maxModelField = 1 << 10

// maxModelParts bounds the parts a multipart body may have before its
// model is found: an outsider's body, read only to judge it.
const maxModelParts = 256

// namedModel is the model c names outside the members the parse read:
// the multipart field "model", a passed-through JSON object's top-level
// "model", or the model a provider-native path names. "" when it names
// none. A body that names two models (two model fields) or one the
// gateway cannot read is refused: what is forwarded must be what was
// judged.
func namedModel(c *providers.Call) (string, error) {
	ct := c.Header.Get("Content-Type")
	if mt, params, err := mime.ParseMediaType(ct); err == nil && strings.HasPrefix(mt, "multipart/") {
		return multipartModel(c.Body, params["boundary"])
	}
	if c.Op == providers.OpProxy && opensJSON(c.Body) {
		// The body passed the strict check (checkPassthroughJSON) when it
		// is JSON at all: one model member at most, names compared
		// decoded.
		if raw, ok := jsonlimit.Member(c.Body, "model"); ok {
			m, ok := jsonlimit.String(raw)
			if !ok {
				return "", apierror.BadRequest("model", "model must be a string")
			}
			if m != "" {
				return m, nil
			}
		}
	}
	if c.Op == providers.OpProxy {
		return pathModel(c.Path), nil
	}
	return "", nil
}

// multipartModel reads the model field of a multipart/form-data body.
func multipartModel(body []byte, boundary string) (string, error) {
	unreadable := apierror.BadRequest("model", "the multipart body could not be read to find its model")
	if boundary == "" {
		return "", unreadable
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var model string
	found := false
	for range maxModelParts {
		p, err := mr.NextPart()
		if err == io.EOF {
			// The closing boundary (a body cut short is an error
			// wrapping io.EOF, not io.EOF itself).
			return model, nil
		}
		if err != nil {
			return "", unreadable
		}
		if p.FormName() != "model" {
			continue
		}
		if found {
			return "", apierror.BadRequest("model", "the body names its model twice")
		}
		v, err := io.ReadAll(io.LimitReader(p, maxModelField+1))
		if err != nil || len(v) > maxModelField {
			return "", unreadable
		}
		model, found = string(v), true
	}
	return "", apierror.BadRequest("model", "the multipart body has more than %d parts", maxModelParts)
}

// pathModel is the model a provider-native path names: the segment after
// "models/" (up to ":" or "/", Gemini's and Vertex AI's) or "model/"
// (up to "/", Bedrock's). The path is the decoded one the provider is
// sent.
func pathModel(path string) string {
	for _, seg := range []string{"/models/", "/model/"} {
		i := strings.Index(path, seg)
		if i < 0 {
			continue
		}
		rest := path[i+len(seg):]
		if j := strings.IndexAny(rest, ":/"); j >= 0 {
			rest = rest[:j]
		}
		if rest != "" {
			return rest
		}
	}
	return ""
}
