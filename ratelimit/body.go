package ratelimit

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/bodybuf"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Bounds of the search for a form's model field: a form carries the
// model among its first few fields (OpenAI's SDKs send it before or right
// after the file), and the value is a short name.
const (
	// maxFormParts is how many parts of a multipart body are looked at
	// for the model field.
	maxFormParts = 64
	// maxFormModel is the longest model field read; a longer one is
	// cut there (policies compare whole names, so it matches none).
	maxFormModel = 256
	// maxBoundary is RFC 2046's longest multipart boundary.
	maxBoundary = 70
)

// readBody reads the body (bounded by MaxRequestBody) for the model and
// the token estimate and shares it with llm_gateway, so it is read once.
// The body is judged by what it is, not by its Content-Type: the gateway
// serves a JSON object sent as text/plain or as curl's form encoding as
// JSON, so the limiter must see its model and size too, or a header
// would skip every model policy and every reservation. A JSON object (the
// gateway's own bounded check, jsonlimit.Object) gives the model and the
// estimate; a multipart form gives its model field and no prompt
// estimate (the size of audio or an image says nothing about tokens);
// anything else counts by its size. A body above the bound is put back
// untouched for the gateway to reject.
func (h *Handler) readBody(q *request) {
	q.bodyDone = true
	q.attrs.Pending &^= policies.PendingModel
	r := q.r
	b, ok := ingress.Body(r)
	if ok {
		q.size = int64(len(b))
	} else if b, ok = h.takeBody(q); !ok {
		return
	}
	if jsonlimit.Object(b) == nil {
		q.body = b
		q.attrs.Model = gjson.GetBytes(b, "model").String()
		return
	}
	if model, form := formModel(r.Header.Get("Content-Type"), b); form {
		q.attrs.Model, q.size = model, 0
	}
}

// takeBody reads r's body, at most MaxRequestBody bytes, and shares it
// with the gateway (ingress.SetBody). It reports false, with q.size set to
// what is known of the size, when there is no body, when it is larger
// than the bound or when reading failed; the gateway then gets the same
// stream it would have had, so it reports the size or the error itself.
func (h *Handler) takeBody(q *request) ([]byte, bool) {
	r := q.r
	if r.Body == nil || r.Body == http.NoBody {
		return nil, false
	}
	if r.ContentLength > h.MaxRequestBody {
		q.size = r.ContentLength
		return nil, false
	}
	var (
		b   []byte
		buf *bodybuf.Buf
		err error
	)
	if r.ContentLength > 0 {
		// The size is declared and bounded: a lent buffer for a large
		// body (the gateway takes it over, see ingress.SetBodyBuf), else
		// one exact allocation, instead of ReadAll's doublings (a 200 KB
		// prompt cost ten copies and twice its size in garbage).
		buf = bodybuf.Get(r.ContentLength)
		if b = buf.Bytes(); buf == nil {
			b = make([]byte, r.ContentLength)
		}
		var n int
		n, err = io.ReadFull(r.Body, b)
		b = b[:n]
	} else {
		b, err = io.ReadAll(io.LimitReader(r.Body, h.MaxRequestBody+1))
	}
	q.size = int64(len(b))
	if err != nil || q.size > h.MaxRequestBody {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	ingress.SetBody(r, b)
	if buf != nil {
		ingress.SetBodyBuf(r, buf)
	}
	return b, true
}

// formModel reports whether b is a multipart form and returns its model
// field (empty when it has none among its first maxFormParts parts). The
// boundary is the Content-Type's when it names one, else the body's own
// first line, so a form is recognised whatever the header claims.
func formModel(contentType string, b []byte) (string, bool) {
	boundary := ""
	if mt, params, err := mime.ParseMediaType(contentType); err == nil && strings.HasPrefix(mt, "multipart/") {
		boundary = params["boundary"]
	}
	if boundary == "" {
		boundary = sniffBoundary(b)
	}
	if boundary == "" {
		return "", false
	}
	mr := multipart.NewReader(bytes.NewReader(b), boundary)
	for i := 0; i < maxFormParts; i++ {
		p, err := mr.NextPart()
		if err != nil {
			// io.EOF after the last part; any other error is a body
			// that is not (or no longer) a form.
			return "", i > 0
		}
		if p.FormName() == "model" {
			v, _ := io.ReadAll(io.LimitReader(p, maxFormModel))
			return strings.TrimSpace(string(v)), true
		}
	}
	return "", true
}

// sniffBoundary returns the boundary a body's first line opens
// ("--boundary\r\n"), or "" when it does not start like a form.
func sniffBoundary(b []byte) string {
	rest, ok := bytes.CutPrefix(b, []byte("--"))
	if !ok {
		return ""
	}
	end := bytes.IndexByte(rest[:min(len(rest), maxBoundary+2)], '\n')
	if end < 1 {
		return ""
	}
	line := bytes.TrimSuffix(rest[:end], []byte("\r"))
	if len(line) == 0 || len(line) > maxBoundary || bytes.ContainsAny(line, " \t") {
		return ""
	}
	return string(line)
}
