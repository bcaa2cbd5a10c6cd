package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// TestWriteErrorShape: a refusal on the Messages API is in Anthropic's
// error shape, elsewhere in the OpenAI envelope, with the same status.
func TestWriteErrorShape(t *testing.T) {
	e := apierror.New(http.StatusTooManyRequests, apierror.TypeRateLimit, "slow down").WithCode("rate_limit_exceeded")
	for _, tc := range []struct {
		path, typePath, want string
	}{
		{"/v1/messages", "error.type", "rate_limit_error"},
		{"/v1/messages/count_tokens", "type", "error"},
		{"/v1/chat/completions", "error.code", "rate_limit_exceeded"},
	} {
		w := httptest.NewRecorder()
		writeError(w, httptest.NewRequest(http.MethodPost, tc.path, nil), e)
		if w.Code != http.StatusTooManyRequests || gjson.Get(w.Body.String(), tc.typePath).String() != tc.want {
			t.Errorf("%s: %d %s", tc.path, w.Code, w.Body)
		}
	}
}
