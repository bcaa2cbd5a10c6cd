package integration

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestRealtimeSpans: with Caddy's tracing on, every response of a
// Realtime session and of a Responses WebSocket is a CLIENT span of its
// own under the socket's SERVER span: the realtime ones named for the
// operation and model, with the response id and the events' usage; the
// Responses ones are the pipeline's attempt spans (gen_ai chat).
func TestRealtimeSpans(t *testing.T) {
	rc := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rc.URL+"/v1/traces")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	up := newFakeRealtime(t)
	anth := responsesAnthropic(t)
	s := realtimeSite(t, up, "")
	s.Before = "tracing {\n\t\tspan gateway\n\t}\n\t" + s.Before
	loadFresh(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(url string, h http.Header, create, until string) {
		t.Helper()
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatalf("dial %s: %v", url, err)
		}
		defer c.CloseNow()
		recv := func(ctx context.Context) (json.RawMessage, error) {
			_, m, err := c.Read(ctx)
			return m, err
		}
		for range 2 {
			if err := c.Write(ctx, websocket.MessageText, []byte(create)); err != nil {
				t.Fatal(err)
			}
			recvUntil(t, ctx, recv, until)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
	run(wsURL("gpt-realtime"), http.Header{"Authorization": {"Bearer " + gatewayKey}, "X-Gateway-Virtual-Key": {"vk-rt"}},
		`{"type":"response.create"}`, "response.done")
	run(responsesWSURL(), http.Header{"Authorization": {"Bearer " + anthropicKey}, "X-Gateway-Api-Key": {gatewayKey},
		"X-Gateway-Provider": {"anthropic"}, "X-Gateway-Custom-Host": {anth.URL}},
		`{"type":"response.create","model":"claude-sonnet-4-5","input":"hello"}`, "response.completed")
	// Unload the traced config: its tracer provider flushes every span.
	realtimeWait(t, "both sockets' log lines", func() bool {
		n := 0
		for _, l := range gatewayLogLines(t) {
			if jsonHas(l, "realtime") || jsonHas(l, "responses_websocket") {
				n++
			}
		}
		return n == 2
	})
	loadSite(t, site{})

	spans := rc.all()
	byID := map[string]*tracepb.Span{}
	for _, sp := range spans {
		byID[hex.EncodeToString(sp.SpanId)] = sp
	}
	count := map[string]int{}
	for _, sp := range spans {
		if sp.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			continue
		}
		count[sp.Name]++
		parent := byID[hex.EncodeToString(sp.ParentSpanId)]
		if parent == nil || parent.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("span %s is not under a server span (parent %v)", sp.Name, parent)
		}
		a := spanAttrs(sp)
		if sp.Name == "realtime gpt-realtime" && (a["gen_ai.usage.input_tokens"] != "100" || a["gen_ai.response.id"] == "" || a["gen_ai.provider.name"] != "openai") {
			t.Errorf("realtime response span attributes %v", a)
		}
	}
	if count["realtime gpt-realtime"] != 2 || count["chat claude-sonnet-4-5"] != 2 {
		t.Errorf("client spans %v, want two per socket (realtime gpt-realtime, chat claude-sonnet-4-5)", count)
	}
}

// jsonHas reports whether the JSON log line l has a top-level member k.
func jsonHas(l, k string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(l), &m) != nil {
		return false
	}
	_, ok := m[k]
	return ok
}
