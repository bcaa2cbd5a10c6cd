package app

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// MCP transports of a declared server.
const (
	MCPTransportStreamable = "streamable"
	MCPTransportSSE        = "sse"
)

// MCPServer is one remote MCP server declared with `mcp_server` in the
// llm block, which the llm_mcp handler relays. It is only ever reached over
// HTTP(S): nothing in the gateway starts a command for a server.
type MCPServer struct {
	// Name identifies the server in /mcp/{name}, in the prefix of its
	// tools' names on /mcp and in logs.
	Name string `json:"name"`
	// URL is the server's endpoint (http or https; {env.VAR} placeholders
	// are resolved when the config loads).
	URL string `json:"url"`
	// Headers are sent on every request to the server; values may be
	// {env.VAR} placeholders, which keep them out of GET /config/.
	Headers map[string]string `json:"headers,omitempty"`
	// Bearer is sent as Authorization: Bearer (an {env.VAR} placeholder,
	// for the same reason).
	Bearer string `json:"bearer,omitempty"`
	// Transport is "streamable" (the default, Streamable HTTP) or "sse"
	// (the 2024-11-05 HTTP+SSE transport).
	Transport string `json:"transport,omitempty"`
	// Allow names who may use the server: a Caddyfile key's name,
	// "workspace:<uuid>" for every key of a workspace, or "*" for every
	// key. Without entries no key may use it.
	Allow []string `json:"allow,omitempty"`
	// Tools are glob patterns (path.Match) of the server's tools that are
	// exposed; without any, all are.
	Tools []string `json:"tools,omitempty"`
	// OAuth obtains the server's bearer token with the OAuth 2 client
	// credentials grant (mcp_oauth.go); it excludes bearer and an
	// Authorization header.
	OAuth *MCPOAuth `json:"oauth_client_credentials,omitempty"`
}

// MCPServerConfig is a declared MCP server as provisioned: placeholders
// resolved, entries checked. It holds the server's credentials, so it is
// never logged or served.
type MCPServerConfig struct {
	Name      string
	URL       *url.URL
	Transport string
	// Header holds the configured headers and the bearer token, resolved.
	Header http.Header
	// Tools are the exposed tools' patterns (empty: all).
	Tools []string
	// OAuth is the client credentials grant of the server's token, nil
	// when it has none.
	OAuth *clientcredentials.Config

	allowAll   bool
	keyNames   map[string]bool
	workspaces map[string]bool
}

// Allows reports whether the holder of id may use the server. Key names
// match Caddyfile keys only: the name of an API-issued key is chosen in its
// workspace and must not reach another workspace's server by colliding
// with a Caddyfile name, so API keys are allowed by workspace.
func (s *MCPServerConfig) Allows(id *identity.Caller) bool {
	if id == nil {
		return false
	}
	if s.allowAll || s.workspaces[id.WorkspaceID] {
		return true
	}
	return id.Source == keys.SourceConfig && s.keyNames[id.Name]
}

// ToolExposed reports whether the server's tool called name is exposed.
func (s *MCPServerConfig) ToolExposed(name string) bool {
	return identity.ModelAllowed(s.Tools, name)
}

// mcpState is the app's part of the MCP gateway: the declared servers.
type mcpState struct {
	// MCPServers are the remote MCP servers llm_mcp relays.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`

	mcpServers []*MCPServerConfig
}

// MCPServerConfigs returns the declared MCP servers as provisioned, sorted
// by name. The slice is shared: never modify it or its servers.
func (a *App) MCPServerConfigs() []*MCPServerConfig { return a.mcpServers }

// MCPPath reports whether path is one llm_mcp serves (/mcp and what is
// under it), whose messages llm_ratelimit leaves to llm_mcp to meter call
// by call (AdmitCall).
func MCPPath(path string) bool { return path == "/mcp" || strings.HasPrefix(path, "/mcp/") }

// mcpServerName is what a server's name may be: it is a path segment and
// the prefix of its tools' names, which clients limit to [A-Za-z0-9_-], so
// "__" (the prefix's separator) is refused too.
var mcpServerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// mcpReservedHeaders are headers the MCP transport itself sets, which a
// configured header must not replace.
var mcpReservedHeaders = []string{"Accept", "Connection", "Content-Length", "Content-Type", "Host",
	"Last-Event-Id", "Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version", "Mcp-Session-Id", "Te",
	"Trailer", "Transfer-Encoding", "Upgrade"}

// provisionMCP checks the declared servers and resolves their
// placeholders.
func (a *App) provisionMCP(repl *caddy.Replacer) error {
	a.mcpServers = make([]*MCPServerConfig, 0, len(a.MCPServers))
	seen := make(map[string]bool, len(a.MCPServers))
	for _, s := range a.MCPServers {
		if !mcpServerName.MatchString(s.Name) || strings.Contains(s.Name, "__") {
			return fmt.Errorf("mcp_server %q: a name is 1 to 32 letters, digits, '-' or '_' (not \"__\"), starting with a letter or digit", s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("mcp_server %q: declared twice", s.Name)
		}
		seen[s.Name] = true
		c, err := a.resolveMCPServer(repl, s)
		if err != nil {
			return fmt.Errorf("mcp_server %q: %v", s.Name, err)
		}
		a.mcpServers = append(a.mcpServers, c)
	}
	slices.SortFunc(a.mcpServers, func(x, y *MCPServerConfig) int { return strings.Compare(x.Name, y.Name) })
	return nil
}

func (a *App) resolveMCPServer(repl *caddy.Replacer, s MCPServer) (*MCPServerConfig, error) {
	raw, err := resolvePlaceholders(repl, "url", s.URL)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("url must be an http:// or https:// URL")
	}
	if u.User != nil || u.Fragment != "" {
		// Credentials in a URL end up in logs and errors; they go in a
		// header or bearer.
		return nil, fmt.Errorf("url must hold neither credentials nor a fragment (give credentials with header or bearer)")
	}
	c := &MCPServerConfig{Name: s.Name, URL: u, Transport: s.Transport, Header: make(http.Header),
		keyNames: map[string]bool{}, workspaces: map[string]bool{}}
	switch c.Transport {
	case "":
		c.Transport = MCPTransportStreamable
	case MCPTransportStreamable, MCPTransportSSE:
	default:
		return nil, fmt.Errorf("transport must be streamable or sse")
	}
	names := make([]string, 0, len(s.Headers))
	for name := range s.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		canon := http.CanonicalHeaderKey(name)
		if !httpguts.ValidHeaderFieldName(name) || slices.Contains(mcpReservedHeaders, canon) || strings.HasPrefix(canon, "Mcp-Param-") {
			return nil, fmt.Errorf("header %q cannot be set: it is not a header name or the MCP transport sets it", name)
		}
		if canon == "Authorization" && s.Bearer != "" {
			return nil, fmt.Errorf("header Authorization and bearer are both given")
		}
		if _, dup := c.Header[canon]; dup {
			return nil, fmt.Errorf("header %q is given twice", name)
		}
		v, err := resolvePlaceholders(repl, "header "+name, s.Headers[name])
		if err != nil {
			return nil, err
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("header %q: the value holds characters a header cannot", name)
		}
		c.Header[canon] = []string{v}
	}
	if s.Bearer != "" {
		if literalSecret(s.Bearer) {
			a.logger.Warn("MCP server bearer token is a literal value: it is visible in GET /config/ of the admin API and in autosave.json; give it as {env.VAR}",
				zap.String("mcp_server", s.Name))
		}
		tok, err := resolvePlaceholders(repl, "bearer", s.Bearer)
		if err != nil {
			return nil, err
		}
		if tok == "" || !httpguts.ValidHeaderFieldValue(tok) {
			return nil, fmt.Errorf("bearer: the token is empty or holds characters a header cannot")
		}
		c.Header.Set("Authorization", "Bearer "+tok)
	}
	if s.OAuth != nil {
		if _, set := c.Header["Authorization"]; set {
			return nil, fmt.Errorf("oauth_client_credentials and bearer or an Authorization header are both given")
		}
		if c.OAuth, err = a.resolveMCPOAuth(repl, s.Name, s.OAuth); err != nil {
			return nil, err
		}
	}
	for _, e := range s.Allow {
		switch ws, isWS := strings.CutPrefix(e, "workspace:"); {
		case e == "*":
			c.allowAll = true
		case isWS:
			id, err := uuid.Parse(ws)
			if err != nil {
				return nil, fmt.Errorf("allow %q: a workspace is workspace:<uuid>", e)
			}
			c.workspaces[id.String()] = true
		case e != "":
			c.keyNames[e] = true
		}
	}
	for _, p := range s.Tools {
		if !keys.ValidPattern(p) {
			return nil, fmt.Errorf("tools %q: not a glob pattern", p)
		}
	}
	c.Tools = s.Tools
	return c, nil
}

// resolvePlaceholders resolves v's {…} placeholders, refusing one that is
// empty: a server called without its credential would fail every call.
func resolvePlaceholders(repl *caddy.Replacer, field, v string) (string, error) {
	for _, ph := range placeholders(v) {
		if repl.ReplaceAll(ph, "") == "" {
			return "", fmt.Errorf("%s: %s is empty (is %s set?)", field, ph, placeholderSubject(ph))
		}
	}
	return repl.ReplaceAll(v, ""), nil
}

// unmarshalMCPServer reads `mcp_server <name> { … }`:
//
//	mcp_server <name> {
//		url       <http(s) URL>
//		header    <Name> <value>      # may repeat; {env.VAR} placeholders
//		bearer    <token>             # sent as Authorization: Bearer
//		transport streamable | sse    # default streamable
//		allow     <key name | workspace:<uuid> | *>...   # may repeat
//		tools     <glob>...           # may repeat; default every tool
//		oauth_client_credentials { … } # the token, obtained (mcp_oauth.go)
//	}
func (a *App) unmarshalMCPServer(d *caddyfile.Dispenser) error {
	var s MCPServer
	if !d.Args(&s.Name) || d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(1) {
		switch opt := d.Val(); opt {
		case "url", "bearer", "transport":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			switch opt {
			case "url":
				s.URL = v
			case "bearer":
				s.Bearer = v
			default:
				s.Transport = v
			}
		case "header":
			var name, v string
			if !d.Args(&name, &v) || d.NextArg() {
				return d.ArgErr()
			}
			if s.Headers == nil {
				s.Headers = map[string]string{}
			}
			if _, dup := s.Headers[name]; dup {
				return d.Errf("header %q is given twice", name)
			}
			s.Headers[name] = v
		case "allow", "tools":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			if opt == "allow" {
				s.Allow = append(s.Allow, args...)
			} else {
				s.Tools = append(s.Tools, args...)
			}
		case "oauth_client_credentials":
			if s.OAuth != nil {
				return d.Err("oauth_client_credentials is given twice")
			}
			o, err := unmarshalMCPOAuth(d)
			if err != nil {
				return err
			}
			s.OAuth = o
		default:
			return d.Errf("unknown mcp_server option %q", opt)
		}
	}
	if s.URL == "" {
		return d.Errf("mcp_server %s: url is required", s.Name)
	}
	a.MCPServers = append(a.MCPServers, s)
	return nil
}
