package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Bedrock batch inference (the control plane's CreateModelInvocationJob,
// GetModelInvocationJob and StopModelInvocationJob at
// bedrock.{region}.amazonaws.com, signed as bedrock-runtime calls are).
// A job runs one model over a JSONL file in S3 whose lines are
// {"recordId","modelInput"}; with modelInvocationType Converse each
// modelInput is a Converse request body, exactly what Prepare sends on
// demand, so a line is translated once, by ConverseRequest. The job
// writes {prefix}/{job id}/{input file}.out, a line per record holding
// modelOutput (a Converse answer, read by the chat translator) or error
// {errorCode, errorMessage}, in no particular order. Bedrock bills batch
// inference at half the on-demand price.

var _ providers.BatchDriver = (*Provider)(nil)

// Names and ids of a job, as the API reference constrains them: the job
// name [a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9+\-.]){0,63}, the idempotency token
// [a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}, a job ARN
// arn:aws…:bedrock:{region}:{account}:model-invocation-job/{12 chars}.
var (
	jobArnPattern = regexp.MustCompile(`^arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:model-invocation-job/([a-z0-9]{12})$`)
	unsafeName    = regexp.MustCompile(`[^a-zA-Z0-9]+`)
)

// inputObject is the name of a job's input file in its folder; the job's
// output is {folder}{job id}/inputObject.out.
const inputObject = "input.jsonl"

// BatchReady implements providers.BatchDriver: a job needs SigV4
// credentials (S3 takes no Bedrock API key), the S3 location and the
// service role the job runs as.
func (p *Provider) BatchReady(s *providers.Settings) bool {
	_, _, err := batchLocation(s)
	return err == nil && s.CloudAAccessKeyID != "" && s.CloudASecretAccessKey != "" && s.CloudABatchRoleARN != ""
}

// BatchOneModel implements providers.BatchDriver: a job names one model.
func (p *Provider) BatchOneModel() bool { return true }

// batchLocation reads clouda_batch_s3_uri, s3://bucket[/prefix].
func batchLocation(s *providers.Settings) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s.CloudABatchS3URI, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || strings.ContainsAny(bucket, "?#") {
		return "", "", apierror.BadRequest("clouda_batch_s3_uri", "clouda_batch_s3_uri must be an S3 location such as s3://my-bucket/batches")
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// folder is the batch's folder in the bucket, {prefix}{name}/.
func folder(prefix, name string) string {
	return prefix + safeName(name) + "/"
}

// safeName is name with every run of characters a job name or token
// refuses replaced by a dash ("batch_abc" → "batch-abc").
func safeName(name string) string {
	s := strings.Trim(unsafeName.ReplaceAllString(name, "-"), "-")
	if s == "" {
		s = "gw"
	}
	return s
}

// recordID is the provider-safe id of a line: the old reference asks
// recordIds of 11 alphanumeric characters, so "gw-12" is "GW000000012".
func recordID(id string) (string, error) {
	n, ok := strings.CutPrefix(id, "gw-")
	v, err := strconv.Atoi(n)
	if !ok || err != nil || v < 0 || v > 999_999_999 {
		return "", fmt.Errorf("bedrock: batch line id %q is not a gateway line id", id)
	}
	return fmt.Sprintf("GW%09d", v), nil
}

// lineID reads a recordID back; "" when r is not one.
func lineID(r string) string {
	n, ok := strings.CutPrefix(r, "GW")
	if !ok || len(n) != 9 {
		return ""
	}
	v, err := strconv.Atoi(n)
	if err != nil || v < 0 {
		return ""
	}
	return "gw-" + strconv.Itoa(v)
}

// SubmitBatch implements providers.BatchDriver: the lines are written to
// {folder}input.jsonl and one Converse job of env.Model created over
// them, writing to {folder}. The job's clientRequestToken is the batch's
// name, so a create sent twice makes one job.
func (p *Provider) SubmitBatch(ctx context.Context, env *providers.BatchEnv, lines providers.BatchLines) (string, error) {
	s := env.Settings
	bucket, prefix, err := batchLocation(s)
	if err != nil {
		return "", err
	}
	dir := folder(prefix, env.Name)
	err = p.putObject(ctx, env, bucket, dir+inputObject, func(w io.Writer) error {
		return lines(func(id string, body []byte) error {
			rid, err := recordID(id)
			if err != nil {
				return err
			}
			_, _ = io.WriteString(w, `{"recordId":"`+rid+`","modelInput":`)
			_, _ = w.Write(body)
			_, err = io.WriteString(w, "}\n")
			return err
		})
	})
	if err != nil {
		return "", err
	}
	name := safeName(env.Name)
	create, _ := json.Marshal(map[string]any{
		"jobName":             "gw-" + name[:min(len(name), 60)],
		"clientRequestToken":  name[:min(len(name), 256)],
		"roleArn":             s.CloudABatchRoleARN,
		"modelId":             env.Model,
		"modelInvocationType": "Converse",
		"inputDataConfig": map[string]any{"s3InputDataConfig": map[string]string{
			"s3Uri": "s3://" + bucket + "/" + dir + inputObject, "s3InputFormat": "JSONL"}},
		"outputDataConfig": map[string]any{"s3OutputDataConfig": map[string]string{"s3Uri": "s3://" + bucket + "/" + dir}},
	})
	status, body, err := p.controlCall(ctx, env, http.MethodPost, create, "model-invocation-job")
	if err != nil {
		return "", err
	}
	if status/100 != 2 {
		return "", env.Error(status, body)
	}
	arn := gjson.GetBytes(body, "jobArn").Str
	if !jobArnPattern.MatchString(arn) {
		return "", apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "bedrock: the job's create answered no job ARN")
	}
	return arn, nil
}

// jobStatus is what each GetModelInvocationJob status means here: ended
// or not; Expired is the job's own timeout.
var jobStatus = map[string]bool{
	"Submitted": false, "Validating": false, "Scheduled": false, "InProgress": false, "Stopping": false,
	"Completed": true, "PartiallyCompleted": true, "Failed": true, "Stopped": true, "Expired": true,
}

// GetBatch implements providers.BatchDriver.
func (p *Provider) GetBatch(ctx context.Context, env *providers.BatchEnv, jobID string) (providers.BatchJob, error) {
	status, body, err := p.controlCall(ctx, env, http.MethodGet, nil, "model-invocation-job", jobID)
	if err != nil {
		return providers.BatchJob{}, err
	}
	if status/100 != 2 {
		return providers.BatchJob{}, env.Error(status, body)
	}
	return parseJob(body, jobID)
}

// parseJob reads a GetModelInvocationJob answer for job arn.
func parseJob(body []byte, arn string) (providers.BatchJob, error) {
	if err := jsonlimit.Object(body); err != nil {
		return providers.BatchJob{}, apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "bedrock: model invocation job: %v", err)
	}
	var j struct {
		JobArn    string `json:"jobArn"`
		Status    string `json:"status"`
		Message   string `json:"message"`
		Total     int    `json:"totalRecordCount"`
		Processed int    `json:"processedRecordCount"`
		Success   int    `json:"successRecordCount"`
		Errors    int    `json:"errorRecordCount"`
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return providers.BatchJob{}, apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "bedrock: model invocation job: %v", err)
	}
	ended, known := jobStatus[j.Status]
	if j.JobArn != arn || !known || j.Total < 0 || j.Processed < 0 || j.Success < 0 || j.Errors < 0 {
		return providers.BatchJob{}, apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "bedrock: the answer is not the model invocation job (status %q)", j.Status)
	}
	out := providers.BatchJob{ID: j.JobArn, Ended: ended, Processing: max(j.Total-j.Processed, 0), Succeeded: j.Success, Errored: j.Errors,
		WindowEnded: j.Status == "Expired"}
	if j.Status == "Failed" {
		out.Failure = "the Bedrock batch inference job failed"
		if j.Message != "" {
			out.Failure += ": " + j.Message
		}
	}
	return out, nil
}

// CancelBatch implements providers.BatchDriver: StopModelInvocationJob.
func (p *Provider) CancelBatch(ctx context.Context, env *providers.BatchEnv, jobID string) error {
	status, body, err := p.controlCall(ctx, env, http.MethodPost, nil, "model-invocation-job", jobID, "stop")
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return env.Error(status, body)
	}
	return nil
}

// BatchResults implements providers.BatchDriver: {folder}{job id}/
// input.jsonl.out.
func (p *Provider) BatchResults(ctx context.Context, env *providers.BatchEnv, jobID string) (io.ReadCloser, error) {
	m := jobArnPattern.FindStringSubmatch(jobID)
	if m == nil {
		return nil, fmt.Errorf("bedrock: %q is not a job ARN", jobID)
	}
	bucket, prefix, err := batchLocation(env.Settings)
	if err != nil {
		return nil, err
	}
	return p.getObject(ctx, env, bucket, folder(prefix, env.Name)+m[2]+"/"+inputObject+".out")
}

// ParseBatchResult implements providers.BatchDriver: a record's
// modelOutput is a Converse answer; its error, the Converse API's error
// body ({"message"}) with the errorCode as its status.
func (p *Provider) ParseBatchResult(line []byte) (providers.BatchResult, error) {
	if err := jsonlimit.Object(line); err != nil {
		return providers.BatchResult{}, fmt.Errorf("bedrock: batch record: %w", err)
	}
	r := gjson.ParseBytes(line)
	id := lineID(r.Get("recordId").Str)
	if id == "" {
		return providers.BatchResult{}, errors.New("bedrock: batch record without a gateway recordId")
	}
	if out := r.Get("modelOutput"); out.IsObject() {
		return providers.BatchResult{ID: id, Kind: providers.BatchSucceeded, Status: http.StatusOK, Body: []byte(out.Raw)}, nil
	}
	e := r.Get("error")
	status := int(e.Get("errorCode").Int())
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	msg := e.Get("errorMessage").Str
	if msg == "" {
		msg = "the provider reported an error without details"
	}
	body, _ := json.Marshal(map[string]string{"message": msg})
	return providers.BatchResult{ID: id, Kind: providers.BatchErrored, Status: status, Body: body}, nil
}

// controlCall sends a signed call to the control plane (the custom host,
// when one is set: a proxy in front of both APIs, or a test's fake) and
// reads its answer, at most 1 MiB. The path is segs, each escaped whole:
// a job ARN travels as one segment, its ':' and '/' escaped, as the SDKs
// send it.
func (p *Provider) controlCall(ctx context.Context, env *providers.BatchEnv, method string, body []byte, segs ...string) (int, []byte, error) {
	s := env.Settings
	region, err := regionOf(s)
	if err != nil {
		return 0, nil, err
	}
	base := &url.URL{Scheme: "https", Host: "bedrock." + region + ".amazonaws.com"}
	if s.CustomHost != "" {
		if base, err = providers.CustomBase(s.CustomHost, ""); err != nil {
			return 0, nil, err
		}
	}
	path, raw := "", ""
	for _, seg := range segs {
		path, raw = path+"/"+seg, raw+"/"+EscapeModelID(seg)
	}
	target := *base
	target.Path = strings.TrimRight(base.Path, "/") + path
	target.RawPath = strings.TrimRight(base.EscapedPath(), "/") + raw
	u := &providers.Upstream{Method: method, URL: &target, Body: body, Header: http.Header{"Accept": {contentJSON}}}
	if body != nil {
		u.Header.Set("Content-Type", contentJSON)
	}
	if err := p.Sign(u, s, region); err != nil {
		return 0, nil, err
	}
	return providers.BatchCall(ctx, env, method, target.String(), u.Header, body, 1<<20)
}
