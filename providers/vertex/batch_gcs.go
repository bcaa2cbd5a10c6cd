package vertex

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// The Cloud Storage side of batch prediction, through the JSON API
// (media upload, object list, object download) with the target's token,
// every call through env.HTTP (the route's transports and egress
// policy). cloudc_batch_gcs_endpoint points it at a store of its own.

// maxAnswer bounds a job or list answer.
const maxAnswer = 1 << 20

// gcsBase is the Cloud Storage JSON API's base URL for s.
func gcsBase(s *providers.Settings) (string, error) {
	ep := s.CloudCBatchGCSEndpoint
	if ep == "" {
		return "https://storage.googleapis.com", nil
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", apierror.BadRequest("cloudc_batch_gcs_endpoint", "cloudc_batch_gcs_endpoint must be an http or https URL")
	}
	return strings.TrimRight(ep, "/"), nil
}

// gcsAuth returns the base URL and the Authorization header of a Cloud
// Storage call: the same token as the job's calls.
func (p *provider) gcsAuth(env *providers.BatchEnv) (string, http.Header, error) {
	base, err := gcsBase(env.Settings)
	if err != nil {
		return "", nil, err
	}
	token, _, err := p.credentials(env.Settings, env.Egress)
	if err != nil {
		return "", nil, err
	}
	return base, http.Header{"Authorization": {"Bearer " + token}}, nil
}

// upload stores what write writes as bucket/object (a media upload,
// spooled first for its length).
func (p *provider) upload(ctx context.Context, env *providers.BatchEnv, bucket, object string, write func(io.Writer) error) error {
	base, h, err := p.gcsAuth(env)
	if err != nil {
		return err
	}
	f, size, done, err := providers.SpoolBatch(write)
	if err != nil {
		return err
	}
	defer done()
	u := base + "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?uploadType=media&name=" + url.QueryEscape(object)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, f)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header = h
	req.Header.Set("Content-Type", "application/jsonl")
	res, err := env.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return gcsError("storing the batch's input in Cloud Storage", res)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxAnswer))
	return nil
}

// readAll returns the objects under prefix whose names end in .jsonl,
// one after the other, each read when the one before it is done.
func (p *provider) readAll(ctx context.Context, env *providers.BatchEnv, bucket, prefix string) (io.ReadCloser, error) {
	base, h, err := p.gcsAuth(env)
	if err != nil {
		return nil, err
	}
	var names []string
	for page := ""; ; {
		q := url.Values{"prefix": {prefix}}
		if page != "" {
			q.Set("pageToken", page)
		}
		status, body, err := send(ctx, env, http.MethodGet, base+"/storage/v1/b/"+url.PathEscape(bucket)+"/o?"+q.Encode(), h, nil)
		if err != nil {
			return nil, err
		}
		if status/100 != 2 {
			return nil, apierror.Newf(status, apierror.TypeUpstream, "listing the batch's results in Cloud Storage: answered %d", status)
		}
		for _, it := range gjson.GetBytes(body, "items").Array() {
			if n := it.Get("name").Str; strings.HasSuffix(n, ".jsonl") {
				names = append(names, n)
			}
		}
		if page = gjson.GetBytes(body, "nextPageToken").Str; page == "" {
			break
		}
	}
	return &objects{ctx: ctx, env: env, base: base, header: h, bucket: bucket, names: names}, nil
}

// objects reads a list of objects in turn, a newline between two.
type objects struct {
	ctx    context.Context
	env    *providers.BatchEnv
	base   string
	header http.Header
	bucket string
	names  []string
	cur    io.ReadCloser
}

func (o *objects) Read(b []byte) (int, error) {
	for {
		if o.cur == nil {
			if len(o.names) == 0 {
				return 0, io.EOF
			}
			u := o.base + "/storage/v1/b/" + url.PathEscape(o.bucket) + "/o/" + url.PathEscape(o.names[0]) + "?alt=media"
			o.names = o.names[1:]
			req, err := http.NewRequestWithContext(o.ctx, http.MethodGet, u, nil)
			if err != nil {
				return 0, err
			}
			req.Header = o.header.Clone()
			res, err := o.env.HTTP.Do(req)
			if err != nil {
				return 0, err
			}
			if res.StatusCode/100 != 2 {
				err := gcsError("reading the batch's results from Cloud Storage", res)
				res.Body.Close()
				return 0, err
			}
			// A newline first: an object whose last line has none does
			// not run into the next one's first.
			o.cur = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(strings.NewReader("\n"), res.Body), res.Body}
		}
		n, err := o.cur.Read(b)
		if errors.Is(err, io.EOF) {
			o.cur.Close()
			o.cur = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (o *objects) Close() error {
	if o.cur != nil {
		return o.cur.Close()
	}
	return nil
}

// gcsError is a Cloud Storage refusal as an *apierror.Error with its
// status and message.
func gcsError(what string, res *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	msg := gjson.GetBytes(body, "error.message").Str
	if msg == "" {
		msg = http.StatusText(res.StatusCode)
	}
	status := res.StatusCode
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	return apierror.Newf(status, apierror.TypeUpstream, "%s: Cloud Storage answered %d (%s)", what, res.StatusCode, msg)
}

// send makes one call and reads its answer, at most maxAnswer.
func send(ctx context.Context, env *providers.BatchEnv, method, u string, h http.Header, body []byte) (int, []byte, error) {
	return providers.BatchCall(ctx, env, method, u, h, body, maxAnswer)
}
