package controlplane

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

func serve(method, path, body string) *httptest.ResponseRecorder {
	rt, err := Build([]Module{Feedback{}}, Options{})
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	rt.Serve(w, r, &identity.Caller{Name: "k"}, []byte(body))
	return w
}

var feedbackRouter, _ = Build([]Module{Feedback{}}, Options{})

func TestOwnsUnservedControlPlane(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/v1/logs", true},
		{"/v1/logs/exports/x", true},
		{"/v1/analytics/graphs/requests", true},
		{"/v1/admin/users", true},
		{"/v1/admin/workspaces/w1", true},
		{"/v1/feedback", true},
		{"/v1/feedback/fb-1", true},
		{"/v1/guardrails", true},
		{"/v1/integrations", true},
		{"/v1/mcp-servers", true},
		{"/v1/labels", true},
		{"/v1/collections", true},
		// Provider paths stay with providers.
		{"/v1/chat/completions", false},
		{"/v1/models", false},
		{"/v1/providers", false},
		{"/v1/configsx", false},
		{"/v1/files", false},
	}
	for _, tt := range tests {
		if got := feedbackRouter.Owns("GET", tt.path); got != tt.want {
			t.Errorf("Owns(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestUnservedAnswer404(t *testing.T) {
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/guardrails"},
		{"POST", "/v1/integrations"},
		{"DELETE", "/v1/labels/l1"},
		{"GET", "/v1/logs/exports"},
		{"GET", "/v1/analytics/graphs/requests"},
		{"GET", "/v1/admin/users"},
	} {
		w := serve(tc.method, tc.path, "")
		if w.Code != 404 || w.Header().Get("x-gateway-error") != "true" {
			t.Fatalf("%s %s: %d %v", tc.method, tc.path, w.Code, w.Header())
		}
		var env struct {
			Error struct{ Code, Type string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error.Code != "control_plane_not_served" || env.Error.Type != "not_found_error" {
			t.Fatalf("%s: body %s", tc.path, w.Body)
		}
	}
}

func TestUnservedLongPathNotEchoed(t *testing.T) {
	long := "/v1/labels/" + strings.Repeat("s", 10000)
	w := serve("GET", long, "")
	if w.Code != 404 || w.Body.Len() > 600 {
		t.Fatalf("%d, %d bytes", w.Code, w.Body.Len())
	}
}

func TestFeedback(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		status                   int
		param                    string
		ids                      int
	}{
		{name: "minimal", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t-1","value":1}`, status: 200, ids: 1},
		{name: "full", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t-1","value":-10,"weight":0.5,"metadata":{"_user":"u1","comment":"bad"}}`, status: 200, ids: 1},
		{name: "node sdk option name", method: "POST", path: "/v1/feedback", body: `{"traceID":"t-1","value":10}`, status: 200, ids: 1},
		{name: "bulk", method: "POST", path: "/v1/feedback", body: `[{"trace_id":"a","value":1},{"trace_id":"b","value":-1,"weight":0}]`, status: 200, ids: 2},
		{name: "bulk bad item", method: "POST", path: "/v1/feedback", body: `[{"trace_id":"a","value":1},{"trace_id":"b","value":11}]`, status: 400, param: "[1].value"},
		{name: "bulk empty", method: "POST", path: "/v1/feedback", body: `[]`, status: 400},
		{name: "bulk too many", method: "POST", path: "/v1/feedback", body: "[" + strings.TrimSuffix(strings.Repeat(`{"trace_id":"a","value":1},`, MaxFeedbackBatch+1), ",") + "]", status: 400},
		{name: "no trace id", method: "POST", path: "/v1/feedback", body: `{"value":1}`, status: 400, param: "trace_id"},
		{name: "empty trace id", method: "POST", path: "/v1/feedback", body: `{"trace_id":" ","value":1}`, status: 400, param: "trace_id"},
		{name: "trace id not a string", method: "POST", path: "/v1/feedback", body: `{"trace_id":5,"value":1}`, status: 400, param: "trace_id"},
		{name: "trace id too long", method: "POST", path: "/v1/feedback", body: `{"trace_id":"` + strings.Repeat("t", 300) + `","value":1}`, status: 400, param: "trace_id"},
		{name: "no value", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t"}`, status: 400, param: "value"},
		{name: "value too high", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":11}`, status: 400, param: "value"},
		{name: "value too low", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":-11}`, status: 400, param: "value"},
		{name: "value fractional", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":1.5}`, status: 400, param: "value"},
		{name: "value a string", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":"1"}`, status: 400, param: "value"},
		{name: "weight too high", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":1,"weight":1.5}`, status: 400, param: "weight"},
		{name: "weight negative", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":1,"weight":-0.1}`, status: 400, param: "weight"},
		{name: "metadata not an object", method: "POST", path: "/v1/feedback", body: `{"trace_id":"t","value":1,"metadata":"x"}`, status: 400, param: "metadata"},
		{name: "not JSON", method: "POST", path: "/v1/feedback", body: `trace_id=t`, status: 400},
		{name: "too deep", method: "POST", path: "/v1/feedback", body: strings.Repeat("[", 100000), status: 400},
		{name: "scalar body", method: "POST", path: "/v1/feedback", body: `5`, status: 400},
		{name: "update", method: "PUT", path: "/v1/feedback/fb-1", body: `{"value":3}`, status: 200, ids: 1},
		{name: "update bad weight", method: "PUT", path: "/v1/feedback/fb-1", body: `{"weight":2}`, status: 400, param: "weight"},
		{name: "wrong method", method: "GET", path: "/v1/feedback", status: 405},
		{name: "delete unserved", method: "DELETE", path: "/v1/feedback/fb-1", status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(tt.method, tt.path, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if tt.status == 200 {
				var resp feedbackResponse
				if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Status != "success" || len(resp.FeedbackIDs) != tt.ids {
					t.Fatalf("body %s", w.Body)
				}
				return
			}
			if w.Header().Get("x-gateway-error") != "true" {
				t.Fatal("not a gateway error")
			}
			if tt.param != "" {
				var env struct{ Error struct{ Param string } }
				_ = json.Unmarshal(w.Body.Bytes(), &env)
				if env.Error.Param != tt.param {
					t.Fatalf("param %q, want %q: %s", env.Error.Param, tt.param, w.Body)
				}
			}
		})
	}
}

// TestDeepBodyRefused: a control-plane body nested past the bound is a
// 400 before any API decodes it.
func TestDeepBodyRefused(t *testing.T) {
	w := serve("POST", "/v1/feedback", `{"trace_id":"t","value":1,"metadata":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "128 levels") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}
