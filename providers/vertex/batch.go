package vertex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
)

// Vertex AI batch prediction for Gemini models
// (projects.locations.batchPredictionJobs create, get and cancel, at the
// same host, project and location as on-demand calls, with the same
// token). A job runs one model over a JSONL file in Cloud Storage whose
// lines are {"request": a generateContent body}, exactly what Prepare
// sends on demand, so a line is translated once, by gemini.BuildRequest.
// The job writes predictions*.jsonl under its output directory, a line
// per request: the request as sent with its response, or a status
// saying why it failed, in no particular order. Output lines carry no
// id of their own, so each request is labelled with its gateway line id
// (labels.gateway_line, a generateContent field Vertex AI bills by and
// echoes back). Batch prediction is billed at half the on-demand price.

var _ providers.BatchDriver = (*provider)(nil)

// lineLabel is the request label naming a line's gateway id.
const lineLabel = "gateway_line"

// inputObject is the name of a job's input file in its folder.
const inputObject = "input.jsonl"

// jobName is the resource name of a job,
// projects/{p}/locations/{l}/batchPredictionJobs/{id}.
var jobName = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/batchPredictionJobs/([0-9]{1,30})$`)

// BatchReady implements providers.BatchDriver: a job needs the Cloud
// Storage location and a credential.
func (p *provider) BatchReady(s *providers.Settings) bool {
	_, _, err := batchLocation(s)
	return err == nil && (s.APIKey != "" || len(s.CloudCServiceAccountJSON) > 0)
}

// BatchOneModel implements providers.BatchDriver: a job names one model.
func (p *provider) BatchOneModel() bool { return true }

// batchLocation reads cloudc_batch_gcs_uri, gs://bucket[/prefix].
func batchLocation(s *providers.Settings) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s.CloudCBatchGCSURI, "gs://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || strings.ContainsAny(bucket, "?#") {
		return "", "", apierror.BadRequest("cloudc_batch_gcs_uri", "cloudc_batch_gcs_uri must be a Cloud Storage location such as gs://my-bucket/batches")
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	return bucket, prefix, nil
}

// folder is the batch's folder in the bucket, {prefix}{name}/.
func folder(prefix, name string) string {
	return prefix + strings.NewReplacer("/", "-", "..", "-").Replace(name) + "/"
}

// SubmitBatch implements providers.BatchDriver: the lines are written to
// {folder}input.jsonl and one job of env.Model created over them,
// writing under {folder}.
func (p *provider) SubmitBatch(ctx context.Context, env *providers.BatchEnv, lines providers.BatchLines) (string, error) {
	pub, model, err := SplitModel(env.Model)
	if err == nil && pub == Anthropic {
		err = apierror.BadRequest("model", "native batches on vertex-ai take Gemini models; Claude models run with batch_mode managed")
	}
	if err != nil {
		return "", err
	}
	if model, err = gemini.Model(model); err != nil {
		return "", err
	}
	bucket, prefix, err := batchLocation(env.Settings)
	if err != nil {
		return "", err
	}
	dir := folder(prefix, env.Name)
	err = p.upload(ctx, env, bucket, dir+inputObject, func(w io.Writer) error {
		return lines(func(id string, body []byte) error {
			req, err := sjson.SetBytes(body, "labels."+lineLabel, id)
			if err != nil {
				return err
			}
			_, _ = io.WriteString(w, `{"request":`)
			_, _ = w.Write(req)
			_, err = io.WriteString(w, "}\n")
			return err
		})
	})
	if err != nil {
		return "", err
	}
	create, _ := json.Marshal(map[string]any{
		"displayName": "gateway " + env.Name,
		"model":       "publishers/google/models/" + model,
		"inputConfig": map[string]any{"instancesFormat": "jsonl", "gcsSource": map[string]any{"uris": []string{"gs://" + bucket + "/" + dir + inputObject}}},
		"outputConfig": map[string]any{"predictionsFormat": "jsonl",
			"gcsDestination": map[string]string{"outputUriPrefix": "gs://" + bucket + "/" + dir}},
	})
	status, body, err := p.jobCall(ctx, env, http.MethodPost, "/batchPredictionJobs", create)
	if err != nil {
		return "", err
	}
	if status/100 != 2 {
		return "", env.Error(status, body)
	}
	job, _, err := parseJob(body)
	if err != nil {
		return "", err
	}
	return job.ID, nil
}

// jobEnded is what each JobState means here: ended or not.
var jobEnded = map[string]bool{
	"JOB_STATE_QUEUED": false, "JOB_STATE_PENDING": false, "JOB_STATE_RUNNING": false, "JOB_STATE_CANCELLING": false,
	"JOB_STATE_PAUSED": false, "JOB_STATE_UPDATING": false,
	"JOB_STATE_SUCCEEDED": true, "JOB_STATE_PARTIALLY_SUCCEEDED": true, "JOB_STATE_FAILED": true,
	"JOB_STATE_CANCELLED": true, "JOB_STATE_EXPIRED": true,
}

// parseJob reads a BatchPredictionJob; outDir is its output directory
// (gs://…), once it has one.
func parseJob(body []byte) (job providers.BatchJob, outDir string, err error) {
	bad := func(why string) error {
		return apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "vertex-ai: batch prediction job: %s", why)
	}
	if err := jsonlimit.Object(body); err != nil {
		return job, "", bad(err.Error())
	}
	r := gjson.ParseBytes(body)
	m := jobName.FindStringSubmatch(r.Get("name").Str)
	state := r.Get("state").Str
	ended, known := jobEnded[state]
	if m == nil || !known {
		return job, "", bad(fmt.Sprintf("not a job (name %q, state %q)", r.Get("name").Str, state))
	}
	// int64 counts travel as JSON strings.
	count := func(k string) int {
		n, _ := strconv.Atoi(r.Get("completionStats." + k).String())
		return max(n, 0)
	}
	job = providers.BatchJob{ID: m[1], Ended: ended, Succeeded: count("successfulCount"), Errored: count("failedCount"),
		Processing: count("incompleteCount"), WindowEnded: state == "JOB_STATE_EXPIRED"}
	if state == "JOB_STATE_FAILED" {
		job.Failure = "the Vertex AI batch prediction job failed"
		if msg := r.Get("error.message").Str; msg != "" {
			job.Failure += ": " + msg
		}
	}
	return job, r.Get("outputInfo.gcsOutputDirectory").Str, nil
}

// GetBatch implements providers.BatchDriver.
func (p *provider) GetBatch(ctx context.Context, env *providers.BatchEnv, jobID string) (providers.BatchJob, error) {
	job, _, err := p.getJob(ctx, env, jobID)
	return job, err
}

func (p *provider) getJob(ctx context.Context, env *providers.BatchEnv, jobID string) (providers.BatchJob, string, error) {
	if _, err := strconv.ParseUint(jobID, 10, 64); err != nil {
		return providers.BatchJob{}, "", fmt.Errorf("vertex-ai: %q is not a job id", jobID)
	}
	status, body, err := p.jobCall(ctx, env, http.MethodGet, "/batchPredictionJobs/"+jobID, nil)
	if err != nil {
		return providers.BatchJob{}, "", err
	}
	if status/100 != 2 {
		return providers.BatchJob{}, "", env.Error(status, body)
	}
	return parseJob(body)
}

// CancelBatch implements providers.BatchDriver.
func (p *provider) CancelBatch(ctx context.Context, env *providers.BatchEnv, jobID string) error {
	if _, err := strconv.ParseUint(jobID, 10, 64); err != nil {
		return fmt.Errorf("vertex-ai: %q is not a job id", jobID)
	}
	status, body, err := p.jobCall(ctx, env, http.MethodPost, "/batchPredictionJobs/"+jobID+":cancel", []byte(`{}`))
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return env.Error(status, body)
	}
	return nil
}

// BatchResults implements providers.BatchDriver: every predictions*.jsonl
// object under the job's output directory, one after the other.
func (p *provider) BatchResults(ctx context.Context, env *providers.BatchEnv, jobID string) (io.ReadCloser, error) {
	_, outDir, err := p.getJob(ctx, env, jobID)
	if err != nil {
		return nil, err
	}
	bucket, _, err := batchLocation(env.Settings)
	if err != nil {
		return nil, err
	}
	dir, ok := strings.CutPrefix(outDir, "gs://"+bucket+"/")
	if !ok || dir == "" {
		// Without an output directory the job wrote nothing: no line has
		// a result.
		return io.NopCloser(strings.NewReader("")), nil
	}
	return p.readAll(ctx, env, bucket, strings.TrimSuffix(dir, "/")+"/")
}

// ParseBatchResult implements providers.BatchDriver: a line's response is
// a generateContent answer; its status, when set without a response,
// the reason it failed, put in Google's error envelope as a 400 (the
// output gives no status code).
func (p *provider) ParseBatchResult(line []byte) (providers.BatchResult, error) {
	if err := jsonlimit.Object(line); err != nil {
		return providers.BatchResult{}, fmt.Errorf("vertex-ai: batch prediction: %w", err)
	}
	r := gjson.ParseBytes(line)
	id := r.Get("request.labels." + lineLabel).Str
	if id == "" {
		return providers.BatchResult{}, errors.New("vertex-ai: batch prediction without the gateway's line label")
	}
	if res := r.Get("response"); res.IsObject() {
		return providers.BatchResult{ID: id, Kind: providers.BatchSucceeded, Status: http.StatusOK, Body: []byte(res.Raw)}, nil
	}
	msg := r.Get("status").Str
	if msg == "" {
		msg = "the provider reported an error without details"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}})
	return providers.BatchResult{ID: id, Kind: providers.BatchErrored, Status: http.StatusBadRequest, Body: body}, nil
}

// jobCall sends a call of the job API, prepared as an on-demand call is
// (the host, project, location and token of Prepare), and reads its
// answer, at most 1 MiB.
func (p *provider) jobCall(ctx context.Context, env *providers.BatchEnv, method, path string, body []byte) (int, []byte, error) {
	c := providers.Call{Op: providers.OpProxy, Method: method, Path: path, Header: http.Header{}, Egress: env.Egress}
	u := providers.Upstream{Header: make(http.Header, 4)}
	if err := p.Prepare(&c, env.Settings, &u); err != nil {
		return 0, nil, err
	}
	if body != nil {
		u.Header.Set("Content-Type", "application/json")
	}
	return send(ctx, env, method, u.URL.String(), u.Header, body)
}
