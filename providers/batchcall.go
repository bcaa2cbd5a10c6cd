package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

// BatchCall sends one call of a batch job API through env.HTTP with
// header h and body (nil for none) and reads its answer, at most limit
// bytes: an answer longer than that is an error, never cut.
func BatchCall(ctx context.Context, env *BatchEnv, method, url string, h http.Header, body []byte, limit int64) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header = h.Clone()
	res, err := env.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(b)) > limit {
		return 0, nil, errors.New("the provider's batch job answer is too large")
	}
	return res.StatusCode, b, nil
}
