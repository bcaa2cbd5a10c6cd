package oaiwire

import (
	"errors"
	"fmt"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// CheckAnswer vets a provider's successful answer before a translator
// decodes it: valid UTF-8 JSON, nested at most jsonlimit.MaxDepth levels
// (checked without recursion, so the decoder after it is bounded), and an
// object. A failure is a provider fault, which the gateway answers with a
// 502.
func CheckAnswer(provider string, body []byte) error {
	if err := jsonlimit.Object(body); err != nil {
		return fmt.Errorf("%s: answer rejected: %w", provider, err)
	}
	return nil
}

// ErrAnswerShape marks a provider answer that is JSON but lacks the fields
// its API always sends; see MissingField.
var ErrAnswerShape = errors.New("answer lacks required fields")

// MissingField is the error for a 2xx answer without a field the
// provider's API always sends: translating it would make an empty
// completion with zero usage out of a provider fault.
func MissingField(provider, field string) error {
	return fmt.Errorf("%s: %w: %s", provider, ErrAnswerShape, field)
}
