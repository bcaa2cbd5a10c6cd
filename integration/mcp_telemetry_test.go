package integration

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestMCPCallSpans: with Caddy's tracing on, a relayed tools/call is a
// CLIENT span "tools/call {tool}" under Caddy's server span, with the
// MCP conventions' attributes, and the server receives that span's
// trace context in params._meta and in the HTTP traceparent header; a
// tool that answers isError marks its span error.type tool_error.
func TestMCPCallSpans(t *testing.T) {
	rc := newOTLPReceiver(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rc.URL+"/v1/traces")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")

	var mu sync.Mutex
	var metaParent string
	f := newFakeMCP(t, false, fakeTool{name: "echo", run: func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		mu.Lock()
		metaParent, _ = req.Params.Meta["traceparent"].(string)
		mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	}}, fakeTool{name: "broken", run: func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no"}}}, nil
	}})
	s := mcpSite(t, mcpServerBlock("srv", f.URL, "allow test"), "egress_allow loopback")
	s.Before = "tracing {\n\t\tspan gateway\n\t}\n\t" + s.Before
	loadFresh(t, s)
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "srv__echo", Arguments: map[string]any{"a": 1}}); err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "srv__broken"}); err != nil || !res.IsError {
		t.Fatalf("broken tool: %v %+v", err, res)
	}
	var headerParents []string
	for _, h := range f.seenHeaders() {
		if tp := h.Get("Traceparent"); tp != "" {
			headerParents = append(headerParents, tp)
		}
	}
	mu.Lock()
	fromMeta := metaParent
	mu.Unlock()
	// Unload the traced config: its tracer provider flushes every span.
	loadSite(t, site{})

	spans := rc.all()
	byID := map[string]*tracepb.Span{}
	for _, sp := range spans {
		byID[hex.EncodeToString(sp.SpanId)] = sp
	}
	find := func(name string) *tracepb.Span {
		for _, sp := range spans {
			if sp.Name == name && sp.Kind == tracepb.Span_SPAN_KIND_CLIENT {
				return sp
			}
		}
		var names []string
		for _, sp := range spans {
			names = append(names, sp.Name)
		}
		t.Fatalf("no CLIENT span %q among %v", name, names)
		return nil
	}
	echo := find("tools/call echo")
	attrs := spanAttrs(echo)
	for k, want := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
		"network.transport": "tcp", "server.address": "127.0.0.1", "llm_gateway.mcp.server": "srv",
	} {
		if attrs[k] != want {
			t.Errorf("span attribute %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
		}
	}
	if _, ok := attrs["error.type"]; ok {
		t.Errorf("a successful call's span has error.type %q", attrs["error.type"])
	}
	parent := byID[hex.EncodeToString(echo.ParentSpanId)]
	if parent == nil || parent.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("the call's span is not under Caddy's server span (parent %v)", parent)
	}
	want := "00-" + hex.EncodeToString(echo.TraceId) + "-" + hex.EncodeToString(echo.SpanId) + "-01"
	if fromMeta != want {
		t.Errorf("params._meta.traceparent at the server = %q, want the call span's %q", fromMeta, want)
	}
	if !slices.Contains(headerParents, want) {
		t.Errorf("no HTTP request reached the server with the call span's traceparent %q (saw %q)", want, headerParents)
	}
	if got := spanAttrs(find("tools/call broken"))["error.type"]; got != "tool_error" {
		t.Errorf("an isError answer's span error.type = %q, want tool_error", got)
	}
}

// TestMCPCallMetrics: each relayed call is one observation of the MCP
// conventions' server and client operation durations, labelled with
// the server and its tool; a call of a name the key cannot use counts
// as denied with no tool label, so a made-up name never becomes a
// series.
func TestMCPCallMetrics(t *testing.T) {
	f := newFakeMCP(t, false, fakeTool{name: "echo"})
	loadFresh(t, mcpSite(t, mcpServerBlock("metered", f.URL, "allow test"), "egress_allow loopback"))
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	series := func(m map[string]float64, name string, labels ...string) float64 {
		var sum float64
	next:
		for k, v := range m {
			if !strings.HasPrefix(k, name+"{") {
				continue
			}
			for _, l := range labels {
				if !strings.Contains(k, l) {
					continue next
				}
			}
			sum += v
		}
		return sum
	}
	okLabels := []string{`mcp_method_name="tools/call"`, `mcp_server="metered"`, `gen_ai_tool_name="echo"`, `error_type=""`}
	before := scrapeMetrics(t)
	for range 3 {
		if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "metered__echo"}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "made-up-tool-xyz"}); err == nil && !res.IsError {
		t.Fatal("an unknown tool was called")
	}
	// The server-side observation is made after the answer is written,
	// so the last call's may land a moment after the client has it.
	after := scrapeMetrics(t)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); after = scrapeMetrics(t) {
		if series(after, "mcp_server_operation_duration_seconds_count", okLabels...)-series(before, "mcp_server_operation_duration_seconds_count", okLabels...) >= 3 &&
			series(after, "mcp_server_operation_duration_seconds_count", `error_type="denied"`)-series(before, "mcp_server_operation_duration_seconds_count", `error_type="denied"`) >= 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range []string{"mcp_server_operation_duration_seconds_count", "mcp_client_operation_duration_seconds_count"} {
		if d := series(after, name, okLabels...) - series(before, name, okLabels...); d != 3 {
			t.Errorf("%s for metered/echo rose by %v, want 3", name, d)
		}
	}
	denied := []string{`error_type="denied"`, `gen_ai_tool_name=""`, `mcp_server=""`}
	if d := series(after, "mcp_server_operation_duration_seconds_count", denied...) -
		series(before, "mcp_server_operation_duration_seconds_count", denied...); d != 1 {
		t.Errorf("denied calls rose by %v, want 1", d)
	}
	if d := series(after, "mcp_client_operation_duration_seconds_count", `error_type="denied"`) -
		series(before, "mcp_client_operation_duration_seconds_count", `error_type="denied"`); d != 0 {
		t.Errorf("a denied call was counted as an upstream call (%v)", d)
	}
	for k := range after {
		if strings.Contains(k, "made-up-tool-xyz") {
			t.Errorf("a caller's made-up name became a series: %s", k)
		}
	}
}
