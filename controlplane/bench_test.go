package controlplane

import (
	"net/http/httptest"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// BenchmarkRouterServe: one management call through the router (body
// check, match, scope, handler, writer) of a handler answering a small
// object: the router's own cost.
func BenchmarkRouterServe(b *testing.B) {
	rt, err := Build([]Module{testModule{"bench", []Route{{Method: "GET", Path: "/v1/bench/{id}", Scope: "bench.read", Handler: func(c *Call) (any, error) {
		return map[string]string{"id": c.PathValue("id")}, nil
	}}}}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	caller := &identity.Caller{Name: "k", Scopes: []string{"*"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		rt.Serve(w, httptest.NewRequest("GET", "/v1/bench/x1", nil), caller, nil)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
