// Package console is the llm_console Caddy handler: the gateway's own web
// pages (overview, keys, logs, playground) served by the same Caddy, on
// whatever route the operator mounts it, e.g.
//
//	handle_path /console/* {
//		llm_console
//	}
//
// Sign-in takes a gateway key, or (with the llm app's oidc block) goes
// through the identity provider, whose token then plays the key's part
// (oidc.go). The key is kept in server memory only, in
// a session held by a caddy.UsagePool (so a reload keeps everyone signed
// in); the browser gets a random session id in an HttpOnly,
// SameSite=Strict cookie (Secure over TLS), and every POST must carry the
// session's CSRF token. Pages are html/template rendered on the server,
// every asset is embedded, and the Content-Security-Policy allows
// nothing but the console's own origin (no inline script or style).
//
// The console has no back door: it calls the gateway's public HTTP API
// (keys, analytics, logs, chat completions) with the signed-in key, so
// the key's scopes, workspace, rate limits, budgets and logs apply
// exactly as to any client. It makes real HTTP requests rather than
// calling the control plane in process because the playground must take
// the whole request path (authentication, limits, routing, ledger), which
// only the llm_gateway route runs; one way of calling serves every page.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Bounds of what a browser sends.
const (
	// maxForm bounds a POSTed form (the playground's message is the
	// largest field).
	maxForm = 64 << 10
	// maxAPITime bounds one page's API calls (a playground answer
	// included).
	maxAPITime = 2 * time.Minute
)

// cookieName is the session cookie's name.
const cookieName = "llm_console_session"

// csp is the Content-Security-Policy of every answer: only the console's
// own scripts, styles and images, no inline code, no framing, forms post
// only to the console.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// sessionPool holds the session store across config reloads.
var sessionPool = caddy.NewUsagePool()

// sessionPoolKey names the one session store every llm_console shares.
const sessionPoolKey = "llm_console.sessions"

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("llm_console", parseCaddyfile)
	// After basic_auth and forward_auth so the operator can put either in
	// front of the console in the same route.
	httpcaddyfile.RegisterDirectiveOrder("llm_console", httpcaddyfile.After, "forward_auth")
}

// Handler is the llm_console HTTP handler (module
// http.handlers.llm_console). It answers every request it gets; it never
// calls the next handler.
type Handler struct {
	// API is the gateway's base URL including /v1, e.g.
	// http://127.0.0.1:8787/v1. Empty means the listener that accepted
	// the console's request, over plain HTTP (over TLS it must be set).
	API string `json:"api,omitempty"`
	// SessionTTL is how long a sign-in lasts (default 8h).
	SessionTTL caddy.Duration `json:"session_ttl,omitempty"`

	logger   *zap.Logger
	sessions *sessions
	client   *http.Client
	// auth authenticates a gateway key (the llm app's Authenticate).
	auth func(key string) (*identity.Caller, bool)
	// tokens is the llm app's identity provider (its oidc block), nil
	// without one: the console's sign-in through it (oidc.go).
	tokens *jwtauth.Authenticator
	pages  map[string]*template.Template
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_console",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision finds the llm app, parses the templates and joins the shared
// session store.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if err := h.validate(); err != nil {
		return err
	}
	a, err := ctx.App(app.ID)
	if err != nil {
		return fmt.Errorf("llm_console: the llm app: %w", err)
	}
	h.auth = a.(*app.App).Authenticate
	h.tokens = a.(*app.App).Tokens()
	v, _, err := sessionPool.LoadOrNew(sessionPoolKey, func() (caddy.Destructor, error) { return newSessions(), nil })
	if err != nil {
		return err
	}
	h.sessions = v.(*sessions)
	return h.setup()
}

// setup builds what does not depend on Caddy: templates and the client.
func (h *Handler) setup() error {
	pages, err := parsePages()
	if err != nil {
		return err
	}
	h.pages = pages
	if h.logger == nil {
		h.logger = zap.NewNop()
	}
	h.client = &http.Client{
		Timeout: maxAPITime,
		// An API answer is never followed elsewhere: a redirect would
		// carry the key to another place.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if h.sessions == nil {
		h.sessions = newSessions()
	}
	return nil
}

// Cleanup leaves the shared session store.
func (h *Handler) Cleanup() error {
	if h.sessions != nil {
		_, _ = sessionPool.Delete(sessionPoolKey)
	}
	return nil
}

func (h *Handler) validate() error {
	if h.API != "" {
		u, err := url.Parse(h.API)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("llm_console: api must be an http(s) URL such as http://127.0.0.1:8787/v1, got %q", h.API)
		}
	}
	if h.SessionTTL < 0 {
		return errors.New("llm_console: session_ttl must not be negative")
	}
	return nil
}

func (h *Handler) ttl() time.Duration {
	if h.SessionTTL > 0 {
		return time.Duration(h.SessionTTL)
	}
	return DefaultSessionTTL
}

// ServeHTTP answers a console request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	path := r.URL.Path
	if strings.HasPrefix(path, "/static/") {
		h.serveStatic(w, r, strings.TrimPrefix(path, "/static/"))
		return nil
	}
	hdr.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost {
		// A cross-site POST is refused before anything else, sign-in
		// included (login CSRF); browsers send Sec-Fetch-Site.
		if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
			h.fail(w, r, nil, http.StatusForbidden, "cross-site request refused")
			return nil
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, nil, http.StatusRequestEntityTooLarge, "the form is too large or malformed")
			return nil
		}
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD, POST")
		h.fail(w, r, nil, http.StatusMethodNotAllowed, "method not allowed")
		return nil
	}
	switch path {
	case "/signin":
		h.signin(w, r)
		return nil
	case "/oidc/login":
		h.oidcLogin(w, r)
		return nil
	case "/oidc/callback":
		h.oidcCallback(w, r)
		return nil
	}
	c, ok := h.current(w, r)
	if !ok {
		return nil
	}
	if r.Method == http.MethodPost && !validCSRF(&c.s, r.PostFormValue("csrf")) {
		h.fail(w, r, c, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
		return nil
	}
	h.route(w, r, c, path)
	return nil
}

// route sends a signed-in request to its page.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, c *ctx, path string) {
	post := r.Method == http.MethodPost
	switch {
	case path == "/" || path == "":
		if post {
			break
		}
		h.overview(w, r, c)
		return
	case path == "/signout" && post:
		h.sessions.drop(c.id)
		http.SetCookie(w, h.cookie(r, "", -1))
		h.redirect(w, r, "/signin")
		return
	case path == "/keys":
		if post {
			break
		}
		h.keysPage(w, r, c)
		return
	case path == "/keys/edit" && !post:
		h.keyEditPage(w, r, c)
		return
	case path == "/keys/update" && post:
		h.keyUpdate(w, r, c)
		return
	case strings.HasPrefix(path, "/keys/") && post:
		h.keysAction(w, r, c, strings.TrimPrefix(path, "/keys/"))
		return
	case path == "/budgets" && !post:
		h.budgetsPage(w, r, c)
		return
	case strings.HasPrefix(path, "/budgets/") && post:
		h.budgetsAction(w, r, c, strings.TrimPrefix(path, "/budgets/"))
		return
	case strings.HasPrefix(path, "/ratelimits/") && post:
		h.rateLimitsAction(w, r, c, strings.TrimPrefix(path, "/ratelimits/"))
		return
	case path == "/virtual-keys" && !post:
		h.virtualKeysPage(w, r, c)
		return
	case strings.HasPrefix(path, "/virtual-keys/") && post:
		h.virtualKeysAction(w, r, c, strings.TrimPrefix(path, "/virtual-keys/"))
		return
	case path == "/prompts":
		h.promptsPage(w, r, c)
		return
	case strings.HasPrefix(path, "/prompts/") && post:
		h.promptsAction(w, r, c, strings.TrimPrefix(path, "/prompts/"))
		return
	case path == "/configs" && !post:
		h.configsPage(w, r, c)
		return
	case strings.HasPrefix(path, "/configs/") && post:
		h.configsAction(w, r, c, strings.TrimPrefix(path, "/configs/"))
		return
	case path == "/batches" && !post:
		h.batchesPage(w, r, c)
		return
	case strings.HasPrefix(path, "/batches/") && post:
		h.batchesAction(w, r, c, strings.TrimPrefix(path, "/batches/"))
		return
	case strings.HasPrefix(path, "/files/") && !post:
		h.fileContent(w, r, c, strings.TrimPrefix(path, "/files/"))
		return
	case path == "/logs" && !post:
		h.logsPage(w, r, c)
		return
	case path == "/breakdowns" && !post:
		h.breakdowns(w, r, c)
		return
	case path == "/users" && !post:
		h.usersPage(w, r, c)
		return
	case path == "/playground":
		h.playground(w, r, c)
		return
	}
	h.fail(w, r, c, http.StatusNotFound, "no such console page")
}

// serveStatic answers an embedded asset.
func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	sub, _ := fs.Sub(staticFS, "static")
	if name == "" || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	http.ServeFileFS(w, r, sub, name)
}

// prefix is the path the console is mounted under (handle_path strips
// it), so links and the cookie name the right place.
func prefix(r *http.Request) string {
	orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
	if !ok || orig.URL == nil {
		return ""
	}
	op, p := orig.URL.Path, r.URL.Path
	if p == "" {
		p = "/"
	}
	var pre string
	switch {
	case strings.HasSuffix(op, p):
		pre = strings.TrimSuffix(op[:len(op)-len(p)], "/")
	case op+"/" == p:
		pre = op
	}
	// Links and redirects start with the prefix: never let it begin a
	// scheme-relative URL ("//host") or a backslash form browsers read as
	// one.
	if strings.HasPrefix(pre, "//") || strings.ContainsAny(pre, "\\") {
		pre = "/" + strings.TrimLeft(strings.ReplaceAll(pre, "\\", "/"), "/")
	}
	return pre
}

// cookie is the session cookie for id (maxAge < 0 deletes it).
func (h *Handler) cookie(r *http.Request, id string, maxAge int) *http.Cookie {
	path := prefix(r) + "/"
	return &http.Cookie{Name: cookieName, Value: id, Path: path, MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// redirect answers 303 to a console page.
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, page string) {
	http.Redirect(w, r, prefix(r)+page, http.StatusSeeOther)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
