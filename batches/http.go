package batches

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/jobs"
)

// maxCreateBody bounds a POST /v1/batches body read here.
const maxCreateBody = 1 << 20

// UseManaged reports whether a POST /v1/batches body for provider must
// run as a managed batch: completion_window "immediate", a provider
// without OpenAI's batch API, or an input file held by the gateway.
// Call it after jobs.Check passed.
func UseManaged(provider string, body []byte) bool {
	if jsonlimit.Object(body) != nil {
		return false
	}
	obj := gjson.ParseBytes(body)
	return obj.Get("completion_window").Str == jobs.WindowImmediate ||
		!jobs.ProviderHasBatchAPI(provider) ||
		files.IsGatewayID(obj.Get("input_file_id").Str)
}

// ResumableHeader answers a batch creation: "true" when the batch can
// resume after a restart or on another instance, else "false; " and the
// names (never the values) of the headers holding credentials the gateway
// does not store, which the batch runs with from memory only.
const ResumableHeader = "X-Gateway-Batch-Resumable"

func resumableValue(h http.Header) string {
	names := Unresumable(h)
	if len(names) == 0 {
		return "true"
	}
	return "false; credentials held in memory only: " + strings.Join(names, ", ")
}

// ServeBatches serves managed batches for caller: POST /v1/batches
// (create; body is the request body, or nil to read it from r), GET
// /v1/batches (list), GET /v1/batches/{id} and POST
// /v1/batches/{id}/cancel. It returns false, writing nothing, for other
// paths. header-only routing state of r (provider, virtual key, config)
// is what each line runs with.
func (e *Engine) ServeBatches(w http.ResponseWriter, r *http.Request, caller Caller, body []byte) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, "/v1"), "/batches")
	if !ok || (rest != "" && rest[0] != '/') {
		return false
	}
	rest = strings.Trim(rest, "/")
	id, sub, _ := strings.Cut(rest, "/")
	var (
		b   any
		err error
	)
	switch {
	case rest == "" && r.Method == http.MethodPost:
		if body == nil {
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxCreateBody))
			if err != nil {
				err = apierror.New(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest, "the request body is too large")
				break
			}
		}
		if b, err = e.Create(r.Context(), caller, r.Header, body); err == nil {
			w.Header().Set(ResumableHeader, resumableValue(r.Header))
		}
	case rest == "" && r.Method == http.MethodGet:
		var limit int
		if limit, err = jobs.BatchListLimit(r.URL.Query()); err == nil {
			b, err = e.List(r.Context(), caller.WorkspaceID, ListParams{After: r.URL.Query().Get("after"), Limit: limit})
		}
	case sub == "" && r.Method == http.MethodGet:
		b, err = e.Get(r.Context(), caller.WorkspaceID, id)
	case sub == "cancel" && r.Method == http.MethodPost:
		b, err = e.Cancel(r.Context(), caller.WorkspaceID, id)
	default:
		err = apierror.Newf(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "%s is not supported on %s", r.Method, apierror.QuotePath(r.URL.Path))
	}
	if err != nil {
		apierror.Write(w, apierror.As(err))
		return true
	}
	out, _ := json.Marshal(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return true
}
