package batches

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// maxLineErrors bounds the errors one validation reports.
const maxLineErrors = 100

// inputLine is one request of the input file.
type inputLine struct {
	CustomID string
	Body     []byte
}

// parseInput validates the input file: every non-blank line a JSON object
// with a unique string custom_id, method POST, url equal to the batch's
// endpoint and an object body. Errors name the 1-based line.
func parseInput(content []byte, endpoint string, maxLines int) ([]inputLine, []LineError) {
	var (
		out  []inputLine
		errs []LineError
		seen = map[string]int{}
	)
	add := func(line int, code, param, format string, args ...any) {
		if len(errs) < maxLineErrors {
			e := LineError{Code: code, Message: fmt.Sprintf(format, args...), Line: ptr(line)}
			if param != "" {
				e.Param = ptr(param)
			}
			errs = append(errs, e)
		}
	}
	for n, rest := 1, content; len(rest) > 0; n++ {
		raw, tail, _ := bytes.Cut(rest, []byte("\n"))
		rest = tail
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		if len(out)+len(errs) >= maxLines {
			add(n, "too_many_lines", "", "the input file has more than %d requests", maxLines)
			break
		}
		if jsonlimit.Object(raw) != nil {
			add(n, "invalid_json_line", "", "line %d is not a valid JSON object", n)
			continue
		}
		obj := gjson.ParseBytes(raw)
		cid := obj.Get("custom_id")
		switch {
		case cid.Type != gjson.String || cid.Str == "":
			add(n, "missing_required_parameter", "custom_id", "line %d has no custom_id", n)
			continue
		case seen[cid.Str] != 0:
			add(n, "duplicate_custom_id", "custom_id", "line %d repeats the custom_id of line %d", n, seen[cid.Str])
			continue
		}
		seen[cid.Str] = n
		if m := obj.Get("method"); m.Type != gjson.String || m.Str != http.MethodPost {
			add(n, "invalid_method", "method", "line %d: method must be POST", n)
			continue
		}
		if u := obj.Get("url"); u.Type != gjson.String || u.Str != endpoint {
			add(n, "mismatched_endpoint", "url", "line %d: url must be the batch's endpoint %s", n, endpoint)
			continue
		}
		body := obj.Get("body")
		if !body.IsObject() {
			add(n, "missing_required_parameter", "body", "line %d: body must be a JSON object", n)
			continue
		}
		out = append(out, inputLine{CustomID: cid.Str, Body: []byte(body.Raw)})
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, LineError{Code: "empty_file", Message: "the input file holds no requests"})
	}
	return out, errs
}

// outputLine is OpenAI's batch output (and error) line.
type outputLine struct {
	ID       string          `json:"id"`
	CustomID string          `json:"custom_id"`
	Response *lineResponse   `json:"response"`
	Error    *lineErrorField `json:"error"`
}

type lineResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

type lineErrorField struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// resultLine turns a runner outcome into an output line; ok reports
// whether it belongs to the output file (a 2xx response).
func resultLine(customID string, status int, body []byte, err error) (line []byte, ok bool) {
	l := outputLine{ID: "batch_req_" + randHex(16), CustomID: customID}
	var ae *apierror.Error
	switch {
	case err != nil && errors.As(err, &ae):
		l.Response = &lineResponse{StatusCode: ae.Status, RequestID: "req_" + randHex(16), Body: ae.Body()}
	case err != nil:
		l.Error = &lineErrorField{Code: "server_error", Message: "the gateway could not complete the request"}
	default:
		l.Response = &lineResponse{StatusCode: status, RequestID: "req_" + randHex(16), Body: jsonBody(body)}
		ok = status >= 200 && status < 300
	}
	b, _ := json.Marshal(l)
	return b, ok
}

// jsonBody keeps a provider body as JSON when it is JSON, else quotes it.
func jsonBody(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) > 0 && jsonlimit.Check(b) == nil {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

// skippedLine is the error line of a request never run because the batch
// expired or was cancelled.
func skippedLine(customID, code, message string) []byte {
	b, _ := json.Marshal(outputLine{ID: "batch_req_" + randHex(16), CustomID: customID, Error: &lineErrorField{Code: code, Message: message}})
	return b
}

func gjsonString(b []byte, path string) string {
	if jsonlimit.Check(b) != nil {
		return ""
	}
	return gjson.GetBytes(b, path).Str
}
