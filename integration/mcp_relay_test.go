package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServerDownMidCall: a server that drops its connections while a
// call is under way gives the caller a JSON-RPC error naming the server,
// and the next call, with the server still away, is refused the same way.
func TestMCPServerDownMidCall(t *testing.T) {
	var f *fakeMCP
	f = newFakeMCP(t, false, fakeTool{name: "hang", run: func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		// The connection the call came on goes away; the answer has
		// nowhere to go.
		f.srv.CloseClientConnections()
		return nil, errors.New("gone")
	}}, fakeTool{name: "ok"})
	loadFresh(t, mcpSite(t, mcpServerBlock("flaky", f.URL, "allow test"), "egress_allow loopback"))
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "flaky__ok"}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "flaky__hang"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || !strings.Contains(werr.Message, `MCP server "flaky"`) {
		t.Fatalf("a call the server broke off: %v, want a JSON-RPC internal error naming the server", err)
	}
	t.Logf("the caller's error: %v (data %s)", werr.Message, werr.Data)
	f.srv.CloseClientConnections()
	f.srv.Close()
	_, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "flaky__ok"})
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError || !strings.Contains(werr.Message, "unavailable") {
		t.Fatalf("a call to a server that is down: %v", err)
	}
	line := waitForLine(t, logPath, `"status":"unavailable"`)
	if !strings.Contains(line, `"server":"flaky"`) {
		t.Fatalf("the log line of the failed call: %s", line)
	}
}

// TestMCPProgressRelayed: the server's progress notifications reach the
// caller under the caller's own token. The tool answers once the caller
// has had them: progress sent just before a result may be overtaken by it
// (see relay.go).
func TestMCPProgressRelayed(t *testing.T) {
	seen := make(chan struct{})
	f := newFakeMCP(t, false, fakeTool{name: "slow", run: func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: "step"}); err != nil {
				return nil, err
			}
		}
		select {
		case <-seen:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
	}})
	loadFresh(t, mcpSite(t, mcpServerBlock("slow", f.URL, "allow test"), "egress_allow loopback"))
	var mu sync.Mutex
	var got []float64
	var tokens []any
	cs := mcpClient(t, mcpURL(""), gatewayKey, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params.Progress)
			tokens = append(tokens, req.Params.ProgressToken)
			if len(got) == 3 {
				close(seen)
			}
			mu.Unlock()
		},
	})
	p := &sdk.CallToolParams{Name: "slow__slow"}
	p.SetProgressToken("caller-token")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("the call (which waits for its progress to reach the caller): %v", err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; text != "done" {
		t.Fatalf("result %q", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []float64{1, 2, 3}) {
		t.Fatalf("progress %v, want [1 2 3]", got)
	}
	for _, tok := range tokens {
		if tok != "caller-token" {
			t.Fatalf("progress token %v, want the caller's", tok)
		}
	}
}

// TestMCPCallRecord: each tools/call is one log record naming the
// server, the tool, the outcome and the sizes, without the arguments,
// the result or any credential.
func TestMCPCallRecord(t *testing.T) {
	files, _ := mcpPair(t)
	_ = files
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "files__read", Arguments: map[string]any{"secret": "arg-value-never-logged"}}); err != nil {
		t.Fatal(err)
	}
	line := waitForLine(t, logPath, `"name":"files__read"`)
	for _, want := range []string{`"method":"tools/call"`, `"server":"files"`, `"tool":"read"`, `"status":"ok"`, `"api_key_name":"test"`, `"request_bytes":`, `"response_bytes":`, `"duration_ms":`} {
		if !strings.Contains(line, want) {
			t.Errorf("the record lacks %s: %s", want, line)
		}
	}
	log := readLog(t)
	for _, secret := range []string{"arg-value-never-logged", gatewayKey, "files-upstream-token"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	// A denied call is a record too.
	_, _ = mcpClient(t, mcpURL(""), mcpOtherKey, nil).CallTool(context.Background(), &sdk.CallToolParams{Name: "files__write"})
	if line := waitForLine(t, logPath, `"name":"files__write"`); !strings.Contains(line, `"status":"denied"`) || !strings.Contains(line, `"api_key_name":"other"`) {
		t.Fatalf("the denied call's record: %s", line)
	}
}

// TestMCPCancellationRelayed: a caller that gives up on a call ends it at
// the server too (the gateway's upstream call is cancelled, and the SDK
// tells the server).
func TestMCPCancellationRelayed(t *testing.T) {
	started, ended := make(chan struct{}), make(chan struct{})
	f := newFakeMCP(t, false, fakeTool{name: "wait", run: func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	}})
	loadFresh(t, mcpSite(t, mcpServerBlock("slow", f.URL, "allow test"), "egress_allow loopback"))
	cs := mcpClient(t, mcpURL(""), gatewayKey, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow__wait"})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was not cancelled")
	}
}
