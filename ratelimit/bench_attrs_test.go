package ratelimit

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// benchAdmitRequest is benchAdmit with the request's headers given.
func benchAdmitRequest(b *testing.B, h *Handler, headers ...string) {
	r := newRequest("key-alice", []byte(chatBody), headers...)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v, err := h.admit(r, nil)
		if err != nil || v == nil || v.refused != nil {
			b.Fatalf("admit: %+v, %v", v, err)
		}
	}
}

// BenchmarkAdmitRouting admits against a policy that reads the lazily
// filled attributes: the provider (routing resolution of the headers) and
// a metadata entry, grouped by the metadata entry.
func BenchmarkAdmitRouting(b *testing.B) {
	ctl := newBenchControl(b)
	addPolicy(b, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, policies.MaxValue,
		cond("provider", "openai", "metadata._user", "*"), "api_key", "metadata._user")
	benchAdmitRequest(b, newHandler(b, ctl), "X-Gateway-Provider", "openai", "X-Gateway-Metadata", `{"_user":"u1","team":"search"}`)
}

// BenchmarkAdmitConfig is BenchmarkAdmitRouting with the provider in an
// inline config, which resolution parses (once, then from its cache).
func BenchmarkAdmitConfig(b *testing.B) {
	ctl := newBenchControl(b)
	addPolicy(b, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, policies.MaxValue,
		cond("provider", "anthropic"), "api_key")
	h := newHandler(b, ctl)
	benchAdmitRequest(b, h, "X-Gateway-Config", `{"virtual_key":"vk-anthropic"}`)
}

// BenchmarkAdmitModel admits against a policy on the model, which reads
// the body.
func BenchmarkAdmitModel(b *testing.B) {
	ctl := newBenchControl(b)
	addPolicy(b, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, policies.MaxValue,
		cond("model", "gpt-4o"), "api_key")
	benchAdmitRequest(b, newHandler(b, ctl))
}
