package handlers

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// TestFlightFinish: finish alone fills the log entry, from what the
// steps returned, whichever way the request ended.
func TestFlightFinish(t *testing.T) {
	parsed := func() *Request {
		hdr := &ingress.Headers{TraceID: "tr", VirtualKey: "vk"}
		return &Request{Header: hdr, RouteHeader: hdr, Identity: &identity.Caller{Name: "key", WorkspaceID: "ws", OrganisationID: "org"},
			Call: providers.Call{Op: providers.OpChat, Path: "/chat/completions", Model: "asked", Stream: true}}
	}
	tests := []struct {
		name  string
		setup func(f *flight)
		check func(t *testing.T, f *flight)
	}{
		{"headers did not parse", func(f *flight) {
			f.setHeader(nil)
			f.err = "bad header"
		}, func(t *testing.T, f *flight) {
			e := &f.entry
			if e.TraceID == "" || e.TraceID != f.out.traceID || e.Error != "bad header" || e.KeyName != "" || e.Operation != "" {
				t.Fatalf("%+v", e)
			}
		}},
		{"unauthenticated", func(f *flight) {
			q := parsed()
			q.Identity, q.Call = nil, providers.Call{}
			f.setHeader(q.Header)
			f.q = q
		}, func(t *testing.T, f *flight) {
			if e := &f.entry; e.TraceID != "tr" || e.KeyName != "" || e.CacheState != "" {
				t.Fatalf("%+v", e)
			}
		}},
		{"local answer", func(f *flight) {
			q := parsed()
			f.setHeader(q.Header)
			f.q, f.localOp = q, "batches"
			f.out.status = 201
		}, func(t *testing.T, f *flight) {
			e := &f.entry
			if e.Operation != "batches" || e.Status != 201 || e.KeyName != "key" || e.Workspace != "ws" || e.Organisation != "org" || e.ConfigID != "" || e.VirtualKey != "" {
				t.Fatalf("%+v", e)
			}
		}},
		{"routed", func(f *flight) {
			q := parsed()
			q.Plan = &routing.Plan{ConfigID: "pc-1"}
			f.setHeader(q.Header)
			f.q, f.planned = q, true
			f.steps = []routing.Step{{Target: testTarget(), Status: 200}}
			f.res = &result{answerInfo: answerInfo{target: testTarget(), label: "MISS"}, model: "answered", usage: &providers.Usage{TotalTokens: 3}}
			f.status, f.done = 200, true
			f.costUSD, f.costKnown = 0.5, true
		}, func(t *testing.T, f *flight) {
			e := &f.entry
			if e.Operation != providers.OpChat || e.Path != "/chat/completions" || e.Model != "answered" || !e.Stream || e.Status != 200 ||
				e.ConfigID != "pc-1" || e.VirtualKey != "vk" || e.Provider != "openai" || e.CacheState != "MISS" ||
				e.Usage.TotalTokens != 3 || e.CostUSD != 0.5 || !e.CostKnown || len(e.Attempts) != 1 || len(e.Extra) != 0 {
				t.Fatalf("%+v", e)
			}
		}},
		{"routing failed before an attempt", func(f *flight) {
			q := parsed()
			q.Plan = &routing.Plan{}
			f.setHeader(q.Header)
			f.q, f.planned, f.err = q, true, "every circuit is open"
			f.out.status = 503
		}, func(t *testing.T, f *flight) {
			e := &f.entry
			if e.Status != 503 || e.Error != "every circuit is open" || e.CacheState != statusNoCache || e.Model != "asked" {
				t.Fatalf("%+v", e)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &flight{}
			tt.setup(f)
			if v, _ := f.placeholder(PlaceholderPrefix + "trace_id"); v != f.out.traceID {
				t.Fatalf("trace id placeholder before finish: %v", v)
			}
			f.finish()
			tt.check(t, f)
		})
	}
}
