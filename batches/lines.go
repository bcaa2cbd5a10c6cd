package batches

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// maxLineErrors bounds the errors one validation reports.
const maxLineErrors = 100

// DefaultMaxLineBytes bounds one line of an input file (the gateway's
// default request body limit): lines are read one at a time, so this and
// a file chunk are what reading the input holds.
const DefaultMaxLineBytes = 32 << 20

// inputLine is one request of the input file.
type inputLine struct {
	CustomID string
	Body     []byte
}

// scanLines calls fn with each line of r (1-based number, the line
// without its newline, valid until fn returns) until fn returns false;
// a line longer than maxLine is passed as nil, its bytes skipped. It
// returns r's error, if any.
func scanLines(r io.Reader, maxLine int, fn func(n int, raw []byte) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for n := 1; ; n++ {
		long = long[:0]
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if !tooLong {
				if len(long)+len(frag) > maxLine+1 {
					tooLong, long = true, long[:0]
				} else {
					long = append(long, frag...)
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(long) > 0 || tooLong {
			line := bytes.TrimSuffix(long, []byte("\n"))
			if tooLong {
				line = nil
			}
			if !fn(n, line) {
				return nil
			}
		}
		if err != nil {
			return nil
		}
	}
}

// validator checks an input file line by line: every non-blank line a
// JSON object with a unique string custom_id, method POST, url equal to
// the batch's endpoint and an object body. Errors name the 1-based line.
type validator struct {
	endpoint string
	maxLines int
	lines    int
	errs     []LineError
	seen     map[string]int
}

func newValidator(endpoint string, maxLines int) *validator {
	return &validator{endpoint: endpoint, maxLines: maxLines, seen: map[string]int{}}
}

func (v *validator) add(line int, code, param, format string, args ...any) {
	if len(v.errs) < maxLineErrors {
		e := LineError{Code: code, Message: fmt.Sprintf(format, args...), Line: ptr(line)}
		if param != "" {
			e.Param = ptr(param)
		}
		v.errs = append(v.errs, e)
	}
}

// check validates line n (nil: longer than the line limit); it returns
// false once the file has too many lines, to stop the scan.
func (v *validator) check(n int, raw []byte, maxLine int) bool {
	if raw != nil {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			return true
		}
	}
	if v.lines+len(v.errs) >= v.maxLines {
		v.add(n, "too_many_lines", "", "the input file has more than %d requests", v.maxLines)
		return false
	}
	if raw == nil {
		v.add(n, "line_too_long", "", "line %d is longer than the gateway's limit of %d bytes", n, maxLine)
		return true
	}
	l, code, param, msg := parseLine(raw, v.endpoint)
	if code == "" {
		if first := v.seen[l.CustomID]; first != 0 {
			code, param, msg = "duplicate_custom_id", "custom_id", fmt.Sprintf("line %%d repeats the custom_id of line %d", first)
		} else {
			v.seen[l.CustomID] = n
			v.lines++
			return true
		}
	}
	v.add(n, code, param, msg, n)
	return true
}

// result returns the validation errors, with empty_file for a file
// without requests.
func (v *validator) result() []LineError {
	if v.lines == 0 && len(v.errs) == 0 {
		return []LineError{{Code: "empty_file", Message: "the input file holds no requests"}}
	}
	return v.errs
}

// parseLine reads one trimmed, non-blank input line; code is empty when
// it is valid, else the error code, param and a message format taking
// the line number.
func parseLine(raw []byte, endpoint string) (l inputLine, code, param, msg string) {
	if err := jsonlimit.Object(raw); err != nil && !faultInBody(raw, err) {
		if d, ok := jsonlimit.AsDuplicate(err); ok {
			return l, "invalid_json_line", d.Path, "line %d: " + strings.ReplaceAll(d.Error(), "%", "%%")
		}
		return l, "invalid_json_line", "", "line %d is not a valid JSON object"
	}
	obj := gjson.ParseBytes(raw)
	cid := obj.Get("custom_id")
	if cid.Type != gjson.String || cid.Str == "" {
		return l, "missing_required_parameter", "custom_id", "line %d has no custom_id"
	}
	if m := obj.Get("method"); m.Type != gjson.String || m.Str != http.MethodPost {
		return l, "invalid_method", "method", "line %d: method must be POST"
	}
	if u := obj.Get("url"); u.Type != gjson.String || u.Str != endpoint {
		return l, "mismatched_endpoint", "url", "line %d: url must be the batch's endpoint " + strings.ReplaceAll(endpoint, "%", "%%")
	}
	body := obj.Get("body")
	if !body.IsObject() {
		return l, "missing_required_parameter", "body", "line %d: body must be a JSON object"
	}
	return inputLine{CustomID: cid.Str, Body: []byte(body.Raw)}, "", "", ""
}

// faultInBody reports whether err, jsonlimit's verdict on a line, is a
// member repeated inside the line's body and nothing else: the line is
// then a request like any other, run through the pipeline, whose strict
// reading refuses that body with the same 400 a direct call gets, in the
// batch's error file. A repeat in the line itself (two custom_id, two
// body) fails validation.
func faultInBody(raw []byte, err error) bool {
	d, ok := jsonlimit.AsDuplicate(err)
	if !ok || !(strings.HasPrefix(d.Path, "body.") || strings.HasPrefix(d.Path, "body[")) {
		return false
	}
	// A DuplicateError is otherwise valid JSON, so Member may read it;
	// the line with its body emptied must pass on its own.
	body, found := jsonlimit.Member(raw, "body")
	if !found {
		return false
	}
	start := cap(raw) - cap(body) // body is raw[start:start+len(body)]
	line := make([]byte, 0, len(raw)-len(body)+2)
	line = append(append(append(line, raw[:start]...), "{}"...), raw[start+len(body):]...)
	return jsonlimit.Object(line) == nil
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
