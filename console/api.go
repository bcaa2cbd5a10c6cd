package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxAPIBody bounds an API answer the console reads: a page of 1000 keys
// or 100 log records is far below it.
const maxAPIBody = 8 << 20

// errNoAPI is shown when the console cannot tell where the API is.
var errNoAPI = errors.New("llm_console: set the api option (e.g. api https://gateway.example.com/v1) when the console is served over TLS")

// apiBase is the gateway's /v1 URL for r: the configured api, else the
// listener that accepted r (its local address, which no client chooses)
// over plain HTTP.
func (h *Handler) apiBase(r *http.Request) (string, error) {
	if h.API != "" {
		return strings.TrimSuffix(h.API, "/"), nil
	}
	if r.TLS != nil {
		return "", errNoAPI
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return "", errNoAPI
	}
	return "http://" + addr.String() + "/v1", nil
}

// apiError is an API's error envelope, shown to the user as is (the APIs
// never put secrets in their messages).
type apiError struct {
	Status  int
	Message string
	Code    string
}

func (e *apiError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("%d: %s", e.Status, e.Message)
}

// call sends one request to the gateway with the session's key and
// returns the status, headers and body. A status of 400 and above is an
// *apiError. headers are name, value pairs.
func (h *Handler) call(ctx context.Context, r *http.Request, key, method, path string, q url.Values, body any, headers ...string) (int, http.Header, []byte, error) {
	base, err := h.apiBase(r)
	if err != nil {
		return 0, nil, nil, err
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if h.API == "" {
		// The site may match on host: ask for the one the browser asked.
		req.Host = r.Host
	}
	req.Header.Set("x-gateway-api-key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		// The transport's error names the URL, not the key.
		return 0, nil, nil, fmt.Errorf("calling the gateway API: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the gateway API's answer: %w", err)
	}
	if len(raw) > maxAPIBody {
		return 0, nil, nil, fmt.Errorf("the gateway API's answer is over %d bytes", maxAPIBody)
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, resp.Header, raw, decodeError(resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// getJSON GETs path and decodes the answer into out.
func (h *Handler) getJSON(r *http.Request, key, path string, q url.Values, out any) error {
	_, _, raw, err := h.call(r.Context(), r, key, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

func decodeError(status int, raw []byte) error {
	var env struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	e := &apiError{Status: status}
	if json.Unmarshal(raw, &env) == nil && env.Error.Message != "" {
		e.Message = env.Error.Message
		if c, ok := env.Error.Code.(string); ok {
			e.Code = c
		}
	} else {
		e.Message = http.StatusText(status)
	}
	return e
}

// statusOf is the HTTP status a console page answers for err: the API's
// own for an API error, else 502.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return http.StatusBadGateway
}
