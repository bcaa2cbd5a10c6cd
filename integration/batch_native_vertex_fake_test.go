package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// The bucket of the Vertex AI batch tests.
const vertexBucket = "gw-vertex-batches"

// fakeVertexBatches is Vertex AI batch prediction for Gemini models as
// its reference gives it: POST …/batchPredictionJobs (displayName,
// model publishers/google/models/{m}, inputConfig {instancesFormat
// jsonl, gcsSource.uris}, outputConfig {predictionsFormat jsonl,
// gcsDestination.outputUriPrefix}) answers a BatchPredictionJob (name
// projects/{p}/locations/{l}/batchPredictionJobs/{id}, state
// JOB_STATE_*, completionStats with int64 counts as strings,
// outputInfo.gcsOutputDirectory once it writes); GET …/{id} reads it and
// POST …/{id}:cancel cancels it. Jobs read their input from, and write
// predictions.jsonl ({request, response} or {request, status}) to, gcs,
// a Cloud Storage JSON API fake (media upload, list by prefix, alt=media
// download). Every call must carry the access token.
type fakeVertexBatches struct {
	*fakeServer
	gcs *httptest.Server

	mu         sync.Mutex
	objects    map[string][]byte // bucket/name → contents
	hold       bool
	expireFrom int
	jobs       map[string]*vertexJob
	creates    int
	gets       int
	cancels    int
	onDemand   int
}

type vertexJob struct {
	id, model, input, output string
	lines                    []json.RawMessage
	canceled, written        bool
}

var vertexJobsPath = regexp.MustCompile(`^/v1/projects/([a-z0-9-]+)/locations/([a-z0-9-]+)/batchPredictionJobs(?:/([0-9]+)(:cancel)?)?$`)

func newFakeVertexBatches(t testing.TB) *fakeVertexBatches {
	f := &fakeVertexBatches{objects: map[string][]byte{}, expireFrom: -1, jobs: map[string]*vertexJob{}}
	f.fakeServer = newFakeServer(t, f.handle)
	f.gcs = httptest.NewServer(http.HandlerFunc(f.serveGCS))
	t.Cleanup(f.gcs.Close)
	return f
}

func (f *fakeVertexBatches) setHold(v bool) {
	f.mu.Lock()
	f.hold = v
	f.mu.Unlock()
}

func (f *fakeVertexBatches) counts() (creates, gets, cancels, onDemand int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.gets, f.cancels, f.onDemand
}

func (f *fakeVertexBatches) job() *vertexJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		return j
	}
	return nil
}

func googleError(w http.ResponseWriter, status int, st, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}})
	writeJSON(w, status, b)
}

func (f *fakeVertexBatches) serveGCS(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+vertexToken {
		googleError(w, 401, "UNAUTHENTICATED", "Invalid Credentials")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/upload/storage/v1/b/") && r.Method == http.MethodPost && r.URL.Query().Get("uploadType") == "media":
		bucket, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(p, "/upload/storage/v1/b/"), "/o"))
		name := r.URL.Query().Get("name")
		var b bytes.Buffer
		if _, err := b.ReadFrom(r.Body); err != nil || name == "" || bucket != vertexBucket {
			googleError(w, 400, "INVALID_ARGUMENT", "bad upload")
			return
		}
		f.objects[bucket+"/"+name] = b.Bytes()
		out, _ := json.Marshal(map[string]any{"kind": "storage#object", "bucket": bucket, "name": name, "size": fmt.Sprint(b.Len())})
		writeJSON(w, 200, out)
	case strings.HasPrefix(p, "/storage/v1/b/") && r.Method == http.MethodGet:
		rest := strings.TrimPrefix(p, "/storage/v1/b/")
		bucket, obj, _ := strings.Cut(rest, "/o")
		if obj == "" {
			prefix := r.URL.Query().Get("prefix")
			var items []map[string]string
			var names []string
			for k := range f.objects {
				if n, ok := strings.CutPrefix(k, bucket+"/"); ok && strings.HasPrefix(n, prefix) {
					names = append(names, n)
				}
			}
			sort.Strings(names)
			for _, n := range names {
				items = append(items, map[string]string{"kind": "storage#object", "bucket": bucket, "name": n})
			}
			out, _ := json.Marshal(map[string]any{"kind": "storage#objects", "items": items})
			writeJSON(w, 200, out)
			return
		}
		name, err := url.PathUnescape(strings.TrimPrefix(obj, "/"))
		data, ok := f.objects[bucket+"/"+name]
		if err != nil || !ok || r.URL.Query().Get("alt") != "media" {
			googleError(w, 404, "NOT_FOUND", "No such object: "+bucket+"/"+name)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
	default:
		googleError(w, 404, "NOT_FOUND", "unknown call")
	}
}

func (f *fakeVertexBatches) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get("Authorization") != "Bearer "+vertexToken {
		googleError(w, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := vertexJobsPath.FindStringSubmatch(r.URL.Path)
	switch {
	case m == nil:
		f.onDemand++
		googleError(w, 500, "INTERNAL", "a native batch must not make on-demand calls")
	case m[3] == "" && r.Method == http.MethodPost:
		f.create(w, m[1], m[2], body)
	case f.jobs[m[3]] == nil:
		googleError(w, 404, "NOT_FOUND", "The BatchPredictionJob does not exist.")
	case m[4] == "" && r.Method == http.MethodGet:
		f.gets++
		writeJSON(w, 200, f.object(m[1], m[2], f.jobs[m[3]]))
	case m[4] == ":cancel" && r.Method == http.MethodPost:
		f.cancels++
		f.jobs[m[3]].canceled = true
		writeJSON(w, 200, []byte(`{}`))
	default:
		googleError(w, 404, "NOT_FOUND", "unknown call")
	}
}

func (f *fakeVertexBatches) create(w http.ResponseWriter, project, location string, body []byte) {
	c := gjson.ParseBytes(body)
	model, okModel := strings.CutPrefix(c.Get("model").Str, "publishers/google/models/")
	in, okIn := strings.CutPrefix(c.Get("inputConfig.gcsSource.uris.0").Str, "gs://")
	out, okOut := strings.CutPrefix(c.Get("outputConfig.gcsDestination.outputUriPrefix").Str, "gs://")
	if !okModel || model == "" || !okIn || !okOut || c.Get("inputConfig.instancesFormat").Str != "jsonl" ||
		c.Get("outputConfig.predictionsFormat").Str != "jsonl" || c.Get("displayName").Str == "" {
		googleError(w, 400, "INVALID_ARGUMENT", "model, inputConfig and outputConfig are required")
		return
	}
	data, ok := f.objects[in]
	if !ok {
		googleError(w, 400, "FAILED_PRECONDITION", "the input file cannot be read: "+in)
		return
	}
	var lines []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if r := gjson.ParseBytes(l); !r.Get("request.contents").IsArray() {
			googleError(w, 400, "INVALID_ARGUMENT", "a line is not {request: a generateContent request}")
			return
		}
		lines = append(lines, json.RawMessage(l))
	}
	f.creates++
	j := &vertexJob{id: fmt.Sprint(1000 + f.creates), model: model, input: in, output: strings.TrimSuffix(out, "/") + "/", lines: lines}
	f.jobs[j.id] = j
	writeJSON(w, 200, f.object(project, location, j))
}

// state is the job's state; an ended job has written its predictions.
func (f *fakeVertexBatches) state(j *vertexJob) (string, int) {
	switch {
	case j.canceled:
		return "JOB_STATE_CANCELLED", 1
	case f.hold:
		return "JOB_STATE_RUNNING", 0
	case f.expireFrom >= 0:
		return "JOB_STATE_EXPIRED", f.expireFrom
	}
	return "JOB_STATE_SUCCEEDED", len(j.lines)
}

func (f *fakeVertexBatches) object(project, location string, j *vertexJob) []byte {
	state, n := f.state(j)
	n = min(n, len(j.lines))
	dir := j.output + "prediction-model-2026-12-02T16:00:00.000000Z"
	ok := 0
	var b bytes.Buffer
	for _, raw := range j.lines[:n] {
		req := gjson.GetBytes(raw, "request")
		line := map[string]any{"status": "", "processed_time": "2026-12-02T16:05:00.000+00:00", "request": json.RawMessage(req.Raw)}
		if strings.Contains(req.Get("contents.0.parts.0.text").Str, "reject") {
			line["status"] = `Bad Request: {"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}}`
		} else {
			ok++
			line["response"] = json.RawMessage(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello from Gemini!"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2095,"candidatesTokenCount":503,"totalTokenCount":2598},"modelVersion":"` + j.model + `"}`)
		}
		l, _ := json.Marshal(line)
		b.Write(append(l, '\n'))
	}
	job := map[string]any{"name": fmt.Sprintf("projects/%s/locations/%s/batchPredictionJobs/%s", project, location, j.id),
		"displayName": "gw", "model": "publishers/google/models/" + j.model, "state": state,
		"createTime": "2026-12-02T16:00:00Z", "completionStats": map[string]string{"successfulCount": fmt.Sprint(ok),
			"failedCount": fmt.Sprint(n - ok), "incompleteCount": fmt.Sprint(len(j.lines) - n)}}
	if state != "JOB_STATE_RUNNING" {
		if !j.written {
			j.written = true
			f.objects[dir+"/predictions.jsonl"] = b.Bytes()
		}
		job["outputInfo"] = map[string]string{"gcsOutputDirectory": "gs://" + dir}
	}
	out, _ := json.Marshal(job)
	return out
}
