// Package tokenest estimates a request's tokens before it is sent, without
// tokenizing: the rate limiter reserves this estimate at admission (and
// settles on the provider's usage), and the cheapest load balancer prices
// it per target. One estimate, so what is reserved and what is compared are
// the same figure.
package tokenest

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Bounds of the estimate's inputs, so that a hostile body cannot overflow
// the arithmetic.
const (
	// Max bounds every estimate: a policy's largest value.
	Max        = int64(policies.MaxValue)
	maxChoices = 128
)

// BytesPerToken is the divisor of the prompt estimate. Four bytes per
// token is the usual rule of thumb for English with BPE tokenizers; on the
// whole JSON body (keys, quotes, roles) it overestimates the prompt a
// little, which suits a reservation that settlement corrects.
const BytesPerToken = 4

// DefaultOutput is the output assumed for a generation request that does
// not bound its own (no max_tokens, max_completion_tokens or
// max_output_tokens): the rate limiter reserves it unless a policy or the
// handler says otherwise, and the cheapest balancer prices it. It only
// has to cover a typical answer, not the model's longest.
const DefaultOutput = 1024

// Parts returns the prompt estimate, ceil(size/4) over the body's bytes,
// and the most the request may generate when the client bounds that
// (max_completion_tokens, max_tokens or max_output_tokens, in that order,
// times n choices), 0 when unbounded; each at most Max. body must have
// passed jsonlimit.Object.
func Parts(body []byte, size int64) (prompt, out int64) {
	prompt = (size + BytesPerToken - 1) / BytesPerToken
	if prompt < 0 || prompt > Max {
		prompt = Max
	}
	if len(body) == 0 {
		return prompt, 0
	}
	// One walk that skips the prompt with a vector search finds the four
	// members, where gjson walked it byte by byte for each one absent.
	var raw [4][]byte
	jsonlimit.Members(body, fields[:], raw[:])
	var f [4]gjson.Result
	for i, v := range raw {
		if v != nil {
			f[i] = gjson.ParseBytes(v)
		}
	}
	for _, r := range f[:3] {
		if r.Type == gjson.Number {
			out = r.Int()
			break
		}
	}
	if out <= 0 {
		return prompt, 0
	}
	out = min(out, Max)
	if n := f[3].Int(); n > 1 {
		out = min(out*min(n, maxChoices), Max)
	}
	return prompt, out
}

// fields are the members Parts reads: the output bounds in order of
// precedence, then the number of choices.
var fields = [4]string{"max_completion_tokens", "max_tokens", "max_output_tokens", "n"}
