package mcp

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// A view is the SDK server one caller talks to: the tools and prompts of
// exactly the servers its key may use, under their exposed names. Access
// is its shape, not a filter on its answers: tools/list lists what the
// view has (the SDK sorts by name, so the order is stable), and a call of
// any other name finds no tool. Views are shared by every caller that
// sees the same servers at the same listings, and rebuilt when a listing
// changes.

// leftOutLogEvery is how often a server left out of /mcp is logged
// (with the count of requests in between), not on every request.
const leftOutLogEvery = 30 * time.Second

// maxViews bounds the views kept; past it the cache starts again (views
// are rebuilt from listings, which stay).
const maxViews = 256

// ref is what an exposed name stands for.
type ref struct {
	u    *remote
	name string
	// paramHeaders: the tool's schema asks for Mcp-Param headers, so its
	// calls go through the SDK's client (rawcall.go).
	paramHeaders bool
}

type view struct {
	server  *sdk.Server
	tools   map[string]ref
	prompts map[string]ref
}

// lookup finds the tool (tools/call) or prompt (prompts/get) exposed as
// name.
func (v *view) lookup(method, name string) (ref, bool) {
	m := v.tools
	if method == methodGetPrompt {
		m = v.prompts
	}
	r, ok := m[name]
	return r, ok
}

type viewCache struct {
	mu sync.Mutex
	m  map[string]*view
}

func newViewCache() *viewCache { return &viewCache{m: make(map[string]*view)} }

// view returns the view of ups (a single server's, under its own names,
// when single). On /mcp a server that cannot be listed is left out (the
// others still serve); on /mcp/{server} its failure is the answer.
func (h *Handler) view(ctx context.Context, ups []*remote, single bool) (*view, error) {
	ls := make([]*listing, len(ups))
	var key strings.Builder
	if single {
		key.WriteString("1")
	}
	for i, u := range ups {
		l, err := u.listing(ctx)
		if err != nil {
			if single {
				return nil, err
			}
			if ok, held := u.leftOut.Allow(time.Now(), leftOutLogEvery); ok {
				h.logger.Warn("MCP server left out of /mcp: it cannot be listed", zapServer(u), zapError(err), zap.Int64("suppressed", held))
			}
			continue
		}
		ls[i] = l
		key.WriteString("\x00" + u.cfg.Name + "@" + strconv.FormatUint(l.version, 10))
	}
	k := key.String()
	h.views.mu.Lock()
	v := h.views.m[k]
	h.views.mu.Unlock()
	if v != nil {
		return v, nil
	}
	v = h.buildView(ups, ls, single)
	h.views.mu.Lock()
	if len(h.views.m) >= maxViews {
		clear(h.views.m)
	}
	h.views.m[k] = v
	h.views.mu.Unlock()
	return v, nil
}

// buildView builds the SDK server of ups's listings (nil listings are
// left out).
func (h *Handler) buildView(ups []*remote, ls []*listing, single bool) *view {
	v := &view{tools: map[string]ref{}, prompts: map[string]ref{}}
	opts := &sdk.ServerOptions{
		// Tools (and prompts when there are any); no logging, no
		// completions, no list-change notifications: stateless serving
		// has no stream to send them on.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	}
	for _, l := range ls {
		if l != nil && len(l.prompts) > 0 {
			opts.Capabilities.Prompts = &sdk.PromptCapabilities{}
		}
	}
	if single && ls[0] != nil {
		opts.Instructions = ls[0].instructions
	}
	v.server = sdk.NewServer(&sdk.Implementation{Name: "caddy-llm-gateway", Version: "1"}, opts)
	for i, u := range ups {
		l := ls[i]
		if l == nil {
			continue
		}
		prefix := u.cfg.Name
		if single {
			prefix = ""
		}
		for _, t := range l.tools {
			name := exposedName(prefix, u.cfg.Name, t.Name)
			if _, taken := v.tools[name]; taken || !objectSchema(t.InputSchema) {
				h.logger.Warn("MCP tool left out: its exposed name is taken or its input schema is not an object",
					zapServer(u), zapName(t.Name))
				continue
			}
			exposed := *t
			exposed.Name = name
			if addTool(v.server, &exposed, h.relayTool(u, t.Name)) {
				v.tools[name] = ref{u: u, name: t.Name, paramHeaders: paramHeaders(t)}
			}
		}
		for _, p := range l.prompts {
			name := exposedName(prefix, u.cfg.Name, p.Name)
			if _, taken := v.prompts[name]; taken {
				continue
			}
			exposed := *p
			exposed.Name = name
			v.server.AddPrompt(&exposed, h.relayPrompt(u, p.Name))
			v.prompts[name] = ref{u: u, name: p.Name}
		}
	}
	return v
}

// objectSchema reports whether a listed input schema (a decoded JSON
// object) has type "object", which the SDK requires of every tool.
func objectSchema(s any) bool {
	m, ok := s.(map[string]any)
	return ok && m["type"] == "object"
}

// addTool adds a tool, reporting false for one the SDK refuses: it
// panics on schemas it cannot take, which a server's listing must not
// turn into a failed request.
func addTool(s *sdk.Server, t *sdk.Tool, h sdk.ToolHandler) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	s.AddTool(t, h)
	return true
}

type viewKey struct{}

func withView(ctx context.Context, v *view) context.Context {
	return context.WithValue(ctx, viewKey{}, v)
}

// viewFrom returns the view ServeHTTP chose for the request.
func viewFrom(ctx context.Context) *view {
	v, _ := ctx.Value(viewKey{}).(*view)
	return v
}
