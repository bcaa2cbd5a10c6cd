package controlplane

import (
	"errors"
	"io"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

// ReadBody is the gateway's one reader of a whole request body, at most
// limit bytes (MaxBody when limit ≤ 0): llm_api reads a management body
// with it, and llm_gateway every body it does not read into a lent buffer
// (a management body with limit min(max_request_body, MaxBody)). A body
// an earlier handler recorded (ingress.SetBody: llm_ratelimit read it) is
// not read again. A declared size over limit is refused before reading
// (413 request_too_large), a declared size is read in one exact
// allocation, and an undeclared one through a limiting reader; a limit
// in front of the gateway (Caddy's request_body) is reported with its own
// bound. w is the response the limiting reader tells to close the
// connection when the limit is passed.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxBody
	}
	if body, ok := ingress.Body(r); ok {
		if int64(len(body)) > limit {
			return nil, TooLarge(limit)
		}
		return body, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, TooLarge(limit)
	}
	var body []byte
	var err error
	if r.ContentLength > 0 {
		// net/http ends the body at Content-Length: no limiting reader.
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if err != nil {
		return nil, ReadError(err)
	}
	return body, nil
}

// ReadError is the answer to a body that could not be read: 413 for one
// cut by a limiting reader (its bound named), else 400.
func ReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLarge(mbe.Limit)
	}
	return apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest, "could not read the request body")
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) error {
	return apierror.Newf(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest,
		"request body exceeds the gateway's limit of %d bytes", limit).WithCode("request_too_large")
}
