package integration

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/tidwall/gjson"
)

// The bucket of the Bedrock batch tests and the service role their jobs
// run as.
const (
	bedrockBucket  = "gw-batches"
	bedrockRoleARN = "arn:aws:iam::123456789012:role/BedrockBatch"
)

// fakeBedrockJobs is Bedrock batch inference as the API reference gives
// it, in front of the runtime fake (whose on-demand calls a native batch
// never makes): POST /model-invocation-job (CreateModelInvocationJob:
// jobName, roleArn, modelId, modelInvocationType, inputDataConfig.
// s3InputDataConfig.s3Uri, outputDataConfig.s3OutputDataConfig.s3Uri,
// clientRequestToken) answers {"jobArn"}; GET /model-invocation-job/{arn}
// the job (status Submitted … InProgress, Stopping, then Completed,
// Stopped or Expired; record counts); POST …/{arn}/stop stops it. The job
// reads its JSONL input from the in-process S3 (gofakes3) and writes
// {output}/{job id}/input.jsonl.out with a record per line: modelOutput,
// a Converse answer, or error {errorCode, errorMessage}. Every call is
// SigV4-signed, checked by the runtime fake's verifier; S3 calls are
// checked against the S3 signature.
type fakeBedrockJobs struct {
	*fakeBedrock
	s3      *httptest.Server
	backend *s3mem.Backend

	// hold keeps jobs in progress; expireFrom (≥ 0) ends a job Expired
	// with the records from that index on unprocessed.
	hold       bool
	expireFrom int
	jobs       map[string]*bedrockJob
	tokens     map[string]string // clientRequestToken → job ARN
	creates    int
	gets       int
	stops      int
	runtime    int // on-demand runtime calls
	s3Calls    int
}

type bedrockJob struct {
	arn, id, model, input, output string
	records                       []json.RawMessage
	stopped, written              bool
}

var fakeJobName = regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$`)

func newFakeBedrockJobs(t testing.TB) *fakeBedrockJobs {
	f := &fakeBedrockJobs{fakeBedrock: &fakeBedrock{t: t}, expireFrom: -1, jobs: map[string]*bedrockJob{}, tokens: map[string]string{}}
	f.fakeBedrock.Server = httptest.NewServer(http.HandlerFunc(f.serveJobs))
	t.Cleanup(f.fakeBedrock.Close)
	f.backend = s3mem.New()
	if err := f.backend.CreateBucket(bedrockBucket); err != nil {
		t.Fatal(err)
	}
	s3h := gofakes3.New(f.backend).Server()
	f.s3 = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s3Authenticate(r); err != nil {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>%s</Message></Error>`, err)
			return
		}
		f.mu.Lock()
		f.s3Calls++
		f.mu.Unlock()
		s3h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.s3.Close)
	return f
}

// s3Authenticate checks an S3 call's SigV4 signature (S3's flavour: the
// path escaped once, the payload hash as sent in x-amz-content-sha256).
func s3Authenticate(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("missing authentication")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 || cred[0] != bedrockAKID || cred[3] != "s3" {
		return fmt.Errorf("the AWS access key id does not exist")
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("missing X-Amz-Date")
	}
	req := &http.Request{Method: r.Method, URL: &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Host: r.Host, Header: http.Header{}, ContentLength: r.ContentLength}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" && h != "content-length" {
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if _, err := hex.DecodeString(hash); err != nil || len(hash) != 64 {
		return fmt.Errorf("x-amz-content-sha256 is not a payload hash")
	}
	creds := aws.Credentials{AccessKeyID: bedrockAKID, SecretAccessKey: bedrockSecret}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), creds, req, hash, "s3", cred[2], signedAt); err != nil {
		return err
	}
	if req.Header.Get("Authorization") != auth {
		return fmt.Errorf("the request signature we calculated does not match the signature you provided")
	}
	return nil
}

func (f *fakeBedrockJobs) setHold(v bool) {
	f.mu.Lock()
	f.hold = v
	f.mu.Unlock()
}

func (f *fakeBedrockJobs) counts() (creates, gets, stops, runtime int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.gets, f.stops, f.runtime
}

// job returns the only job, nil when none was created.
func (f *fakeBedrockJobs) job() *bedrockJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		return j
	}
	return nil
}

func (f *fakeBedrockJobs) serveJobs(w http.ResponseWriter, r *http.Request) {
	rest, isJobs := strings.CutPrefix(r.URL.EscapedPath(), "/model-invocation-job")
	if !isJobs {
		f.mu.Lock()
		f.runtime++
		f.mu.Unlock()
		f.serve(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if err := f.authenticate(r, body); err != nil {
		bedrockError(w, http.StatusForbidden, "AccessDeniedException", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	arn := ""
	if len(parts) > 0 && parts[0] != "" {
		var err error
		if arn, err = url.PathUnescape(parts[0]); err != nil || f.jobs[arn] == nil {
			bedrockError(w, http.StatusNotFound, "ResourceNotFoundException", "The specified job could not be found")
			return
		}
	}
	switch {
	case rest == "" && r.Method == http.MethodPost:
		f.create(w, body)
	case len(parts) == 1 && arn != "" && r.Method == http.MethodGet:
		f.gets++
		writeJSON(w, 200, f.object(f.jobs[arn]))
	case len(parts) == 2 && parts[1] == "stop" && r.Method == http.MethodPost:
		f.stops++
		f.jobs[arn].stopped = true
		w.WriteHeader(http.StatusOK)
	default:
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation")
	}
}

func (f *fakeBedrockJobs) create(w http.ResponseWriter, body []byte) {
	c := gjson.ParseBytes(body)
	in, _ := strings.CutPrefix(c.Get("inputDataConfig.s3InputDataConfig.s3Uri").Str, "s3://"+bedrockBucket+"/")
	out, _ := strings.CutPrefix(c.Get("outputDataConfig.s3OutputDataConfig.s3Uri").Str, "s3://"+bedrockBucket+"/")
	switch {
	case !fakeJobName.MatchString(c.Get("jobName").Str) || c.Get("roleArn").Str != bedrockRoleARN || c.Get("modelId").Str == "":
		bedrockError(w, 400, "ValidationException", "jobName, roleArn and modelId are required")
		return
	case c.Get("modelInvocationType").Str != "Converse" || in == "" || out == "" || !strings.HasSuffix(in, ".jsonl"):
		bedrockError(w, 400, "ValidationException", "the input must be a JSONL object and the output a folder in the bucket")
		return
	}
	if arn, ok := f.tokens[c.Get("clientRequestToken").Str]; ok && arn != "" {
		writeJSON(w, 200, []byte(`{"jobArn":"`+arn+`"}`))
		return
	}
	obj, err := f.backend.GetObject(bedrockBucket, in, nil)
	if err != nil {
		bedrockError(w, 400, "ValidationException", "the input object cannot be read: "+err.Error())
		return
	}
	data, _ := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	var records []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		r := gjson.ParseBytes(l)
		if !r.Get("recordId").Exists() || !r.Get("modelInput.messages").IsArray() || r.Get("modelInput.modelId").Exists() {
			bedrockError(w, 400, "ValidationException", "a record is not {recordId, modelInput: a Converse request}")
			return
		}
		records = append(records, json.RawMessage(l))
	}
	f.creates++
	id := fmt.Sprintf("job%09d", f.creates)
	j := &bedrockJob{arn: "arn:aws:bedrock:us-west-2:123456789012:model-invocation-job/" + id, id: id, model: c.Get("modelId").Str,
		input: in, output: strings.TrimSuffix(out, "/") + "/", records: records}
	f.jobs[j.arn] = j
	f.tokens[c.Get("clientRequestToken").Str] = j.arn
	writeJSON(w, 200, []byte(`{"jobArn":"`+j.arn+`"}`))
}

// status is the job's status; an ended job has written its output.
func (f *fakeBedrockJobs) status(j *bedrockJob) string {
	switch {
	case j.stopped:
		f.write(j, 1)
		return "Stopped"
	case f.hold:
		return "InProgress"
	case f.expireFrom >= 0:
		f.write(j, f.expireFrom)
		return "Expired"
	}
	f.write(j, len(j.records))
	return "Completed"
}

// write writes the output of the first n records, once.
func (f *fakeBedrockJobs) write(j *bedrockJob, n int) {
	if j.written {
		return
	}
	j.written = true
	var b bytes.Buffer
	for _, raw := range j.records[:min(n, len(j.records))] {
		r := gjson.ParseBytes(raw)
		text, _ := lastUserText([]byte(r.Get("modelInput").Raw))
		line := map[string]any{"recordId": r.Get("recordId").Str, "modelInput": json.RawMessage(r.Get("modelInput").Raw)}
		if strings.Contains(text, "reject") {
			line["error"] = map[string]any{"errorCode": 400, "errorMessage": "Malformed input request: the prompt was refused"}
		} else {
			line["modelOutput"] = json.RawMessage(`{"output":{"message":{"role":"assistant","content":[{"text":"Hello from Bedrock!"}]}},"stopReason":"end_turn","usage":{"inputTokens":2095,"outputTokens":503,"totalTokens":2598},"metrics":{"latencyMs":100}}`)
		}
		l, _ := json.Marshal(line)
		b.Write(append(l, '\n'))
	}
	key := j.output + j.id + "/" + j.input[strings.LastIndexByte(j.input, '/')+1:] + ".out"
	if _, err := f.backend.PutObject(bedrockBucket, key, nil, bytes.NewReader(b.Bytes()), int64(b.Len()), nil); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeBedrockJobs) object(j *bedrockJob) []byte {
	status := f.status(j)
	processed, success := 0, 0
	if status != "InProgress" {
		n := len(j.records)
		if status == "Stopped" {
			n = 1
		} else if status == "Expired" {
			n = f.expireFrom
		}
		processed = min(n, len(j.records))
		for _, raw := range j.records[:processed] {
			text, _ := lastUserText([]byte(gjson.GetBytes(raw, "modelInput").Raw))
			if !strings.Contains(text, "reject") {
				success++
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"jobArn": j.arn, "jobName": "gw", "modelId": j.model, "roleArn": bedrockRoleARN, "status": status,
		"submitTime": "2026-12-02T16:00:00Z", "totalRecordCount": len(j.records), "processedRecordCount": processed,
		"successRecordCount": success, "errorRecordCount": processed - success})
	return b
}
