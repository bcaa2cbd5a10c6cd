package integration

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf) on 127.0.0.1.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) all() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...)
}

// attrs flattens a span's attributes to strings.
func spanAttrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = anyString(kv.Value)
	}
	return out
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_DoubleValue:
		return "double"
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyString(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return "?"
}

// TestObserveTraceSpans runs a chat, a stream, a retry and a fallback
// through a Caddy with the tracing directive exporting to an in-process
// OTLP receiver, then checks each upstream attempt's CLIENT span: its
// name, parent (Caddy's server span), GenAI attributes, and that the
// provider received the attempt's traceparent. Unloading the traced
// config shuts Caddy's tracer provider down, which exports every span.
func TestObserveTraceSpans(t *testing.T) {
	rc := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rc.URL+"/v1/traces")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")

	up := newFakeOpenAI(t)
	var fails atomic.Int32
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.Contains(string(body), `"fail-once"`) && fails.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"message":"boom","type":"server_error"}}`)
			return true
		}
		return false
	}
	dead := newFakeOpenAI(t)
	dead.Hook = func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"down","type":"server_error"}}`)
		return true
	}
	loadSite(t, site{Before: "tracing {\n\t\tspan gateway\n\t}", Gateway: "custom_host_allow loopback\n\t\t\ttrace_content"})
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}

	steps := []struct {
		name, body string
		headers    []string
	}{
		{"chat", `{"model":"gpt-4o-mini","max_tokens":50,"temperature":0.5,"messages":[{"role":"user","content":"secret-prompt"}]}`, hdr},
		{"stream", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, hdr},
		{"retry", `{"model":"fail-once","messages":[]}`, []string{"x-gateway-config", `{"retry":{"attempts":1,"on_status_codes":[500]},"provider":"openai","api_key":"sk-test-provider","custom_host":"` + up.URL + `"}`}},
		{"fallback", `{"model":"fb-model","messages":[]}`, []string{"x-gateway-config", `{"strategy":{"mode":"fallback"},"targets":[` + target(dead, "") + `,` + target(up, "") + `]}`}},
	}
	traceIDs := map[string]string{}
	for _, s := range steps {
		resp, raw := do(t, "POST", "/chat/completions", []byte(s.body), s.headers...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", s.name, resp.StatusCode, raw)
		}
		tp := up.last().Header.Get("Traceparent")
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[3] != "01" {
			t.Fatalf("%s: provider saw traceparent %q", s.name, tp)
		}
		traceIDs[s.name] = parts[1]
	}
	// Unload the traced config: the tracer provider shuts down and flushes.
	loadSite(t, site{})

	spans := rc.all()
	byTrace := map[string][]*tracepb.Span{}
	for _, s := range spans {
		id := hex.EncodeToString(s.TraceId)
		byTrace[id] = append(byTrace[id], s)
	}
	clientSpans := func(name string) (client []*tracepb.Span, server *tracepb.Span) {
		for _, s := range byTrace[traceIDs[name]] {
			switch s.Kind {
			case tracepb.Span_SPAN_KIND_CLIENT:
				client = append(client, s)
			case tracepb.Span_SPAN_KIND_SERVER:
				server = s
			}
		}
		if server == nil {
			t.Fatalf("%s: no server span among %d spans", name, len(spans))
		}
		sort.Slice(client, func(i, j int) bool {
			return spanAttrs(client[i])["gateway.attempt"] < spanAttrs(client[j])["gateway.attempt"]
		})
		for _, c := range client {
			if string(c.ParentSpanId) != string(server.SpanId) {
				t.Errorf("%s: client span %q is not a child of the server span", name, c.Name)
			}
		}
		return client, server
	}

	check := func(step string, s *tracepb.Span, want map[string]string, absent ...string) {
		t.Helper()
		a := spanAttrs(s)
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s: %s = %q, want %q (all %v)", step, k, a[k], v, a)
			}
		}
		for _, k := range absent {
			if _, ok := a[k]; ok {
				t.Errorf("%s: unexpected %s = %q", step, k, a[k])
			}
		}
	}

	chat, _ := clientSpans("chat")
	if len(chat) != 1 || chat[0].Name != "chat gpt-4o-mini" {
		t.Fatalf("chat: %d client spans %v", len(chat), chat)
	}
	check("chat", chat[0], map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
		"gen_ai.response.model": "gpt-4o-mini", "gen_ai.response.id": "chatcmpl-1", "gen_ai.response.finish_reasons": "[stop]",
		"gen_ai.usage.input_tokens": "9", "gen_ai.usage.output_tokens": "3", "gen_ai.request.max_tokens": "50",
		"gen_ai.request.temperature": "double", "server.address": "127.0.0.1", "openai.api.type": "chat_completions",
		"gateway.attempt": "0",
	}, "error.type", "gen_ai.request.stream")
	if in := spanAttrs(chat[0])["gen_ai.input.messages"]; !strings.Contains(in, "secret-prompt") {
		t.Errorf("chat: trace_content on, input messages %q", in)
	}

	stream, _ := clientSpans("stream")
	if len(stream) != 1 {
		t.Fatalf("stream: %d client spans", len(stream))
	}
	check("stream", stream[0], map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.stream": "true",
		"gen_ai.usage.input_tokens": "9", "gen_ai.usage.output_tokens": "3",
	}, "error.type")
	if _, ok := spanAttrs(stream[0])["gen_ai.response.time_to_first_chunk"]; !ok {
		t.Error("stream: no time_to_first_chunk")
	}

	retry, _ := clientSpans("retry")
	if len(retry) != 2 {
		t.Fatalf("retry: %d client spans, want 2 siblings", len(retry))
	}
	check("retry first", retry[0], map[string]string{"gateway.attempt": "0", "error.type": "500", "gen_ai.request.model": "fail-once"})
	check("retry second", retry[1], map[string]string{"gateway.attempt": "1", "gen_ai.usage.output_tokens": "3"}, "error.type")
	if retry[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("retry: failed attempt status %v", retry[0].Status)
	}

	fb, _ := clientSpans("fallback")
	if len(fb) != 2 {
		t.Fatalf("fallback: %d client spans, want 2 siblings", len(fb))
	}
	check("fallback first", fb[0], map[string]string{"gateway.attempt": "0", "error.type": "503", "gateway.target": "config.targets[0]"})
	check("fallback second", fb[1], map[string]string{"gateway.attempt": "1", "gateway.target": "config.targets[1]"}, "error.type")

	// Without trace_content, spans carry no message content.
	loadSite(t, site{Before: "tracing {\n\t\tspan gateway\n\t}"})
	do(t, "POST", "/chat/completions", []byte(`{"model":"no-content","messages":[{"role":"user","content":"secret-prompt-2"}]}`), hdr...)
	loadSite(t, site{})
	found := false
	for _, s := range rc.all() {
		if s.Name != "chat no-content" {
			continue
		}
		found = true
		for k, v := range spanAttrs(s) {
			if strings.Contains(v, "secret-prompt-2") || strings.Contains(k, "messages") {
				t.Errorf("content recorded without trace_content: %s = %q", k, v)
			}
		}
	}
	if !found {
		t.Error("no span for the request without trace_content")
	}
}
