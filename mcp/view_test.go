package mcp

import (
	"context"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

func tool(name string) *sdk.Tool {
	return &sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}
}

// listed connects a client to v's server in memory and lists its tools
// and prompts.
func listed(t *testing.T, v *view) (tools, prompts []string) {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := v.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tr.Tools {
		tools = append(tools, x.Name)
	}
	if pr, err := cs.ListPrompts(ctx, nil); err == nil {
		for _, x := range pr.Prompts {
			prompts = append(prompts, x.Name)
		}
	}
	return tools, prompts
}

func TestBuildView(t *testing.T) {
	guard, _ := upstream.NewGuard(nil)
	h := &Handler{logger: zap.NewNop(), progress: newProgressRoutes(), views: newViewCache()}
	a := newRemote(context.Background(), testConfig(t, "https://a.example/mcp"), guard, h.progress)
	a.cfg.Name = "alpha"
	b := newRemote(context.Background(), testConfig(t, "https://b.example/mcp"), guard, h.progress)
	b.cfg.Name = "beta"
	la := &listing{tools: []*sdk.Tool{tool("zeta"), tool("read"),
		{Name: "bad_schema", InputSchema: map[string]any{"type": "string"}}}}
	lb := &listing{tools: []*sdk.Tool{tool("read")}, prompts: []*sdk.Prompt{{Name: "greet"}}}

	v := h.buildView([]*remote{a, b}, []*listing{la, lb}, false)
	tools, prompts := listed(t, v)
	if want := []string{"alpha__read", "alpha__zeta", "beta__read"}; !slices.Equal(tools, want) {
		t.Fatalf("tools %q, want %q (sorted, namespaced, the bad schema left out)", tools, want)
	}
	if !slices.Equal(prompts, []string{"beta__greet"}) {
		t.Fatalf("prompts %q", prompts)
	}
	if r, ok := v.lookup(methodCallTool, "beta__read"); !ok || r.u != b || r.name != "read" {
		t.Fatalf("lookup beta__read: %+v %v", r, ok)
	}
	for _, name := range []string{"read", "alpha__bad_schema", "beta__greet"} {
		if _, ok := v.lookup(methodCallTool, name); ok {
			t.Errorf("lookup of tool %q found one", name)
		}
	}
	if _, ok := v.lookup(methodGetPrompt, "beta__greet"); !ok {
		t.Fatal("prompt beta__greet not found")
	}

	// A server left out (nil listing) contributes nothing; one server's
	// view uses its own names.
	v = h.buildView([]*remote{a, b}, []*listing{nil, lb}, false)
	if tools, _ := listed(t, v); !slices.Equal(tools, []string{"beta__read"}) {
		t.Fatalf("with alpha left out: %q", tools)
	}
	v = h.buildView([]*remote{a}, []*listing{la}, true)
	if tools, _ := listed(t, v); !slices.Equal(tools, []string{"read", "zeta"}) {
		t.Fatalf("one server's view: %q", tools)
	}
}
