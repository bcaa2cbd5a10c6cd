package console

import (
	"errors"
	"html/template"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// maxKeyLen bounds a gateway key typed into the sign-in form.
const maxKeyLen = 512

// ctx is a signed-in request: its session and who the key is.
type ctx struct {
	id string
	s  session
	// who is the key's identity now (a revoked key signs the session
	// out on its next page).
	who *identity.Caller
	// form and status, when set, are a refused form the page is
	// rendered again for, and the status to answer (forms.go).
	form   *formState
	status int
}

// can reports whether the signed-in key holds scope, to show a page's
// write controls only to keys that may use them (the API checks again).
func (c *ctx) can(scope string) bool { return c != nil && c.who != nil && c.who.Can(scope) }

// page is what every template gets.
type page struct {
	// P is the mount prefix links start with.
	P     string
	Title string
	Nav   string
	CSRF  string
	Who   string
	Flash string
	Err   string
	// Refresh, when set, moves the browser on to it (a meta refresh:
	// no script, so the CSP stays as it is).
	Refresh string
	// Form is a refused form to show again (forms.go).
	Form formState
	Data any
}

// current returns the signed-in request, or sends the browser to sign in.
func (h *Handler) current(w http.ResponseWriter, r *http.Request) (*ctx, bool) {
	ck, err := r.Cookie(cookieName)
	if err == nil {
		if s, ok := h.sessions.get(ck.Value); ok {
			// The key is checked on every page, so a revoked, expired or
			// rotated-out key ends the session at once.
			if who, ok := h.auth(s.key); ok {
				return &ctx{id: ck.Value, s: s, who: who}, true
			}
			h.sessions.drop(ck.Value)
		}
	}
	if r.Method == http.MethodPost {
		h.fail(w, r, nil, http.StatusForbidden, "not signed in: sign in and try again")
		return nil, false
	}
	h.redirect(w, r, "/signin")
	return nil, false
}

// signin shows the sign-in form and, on POST, starts a session for a key
// the gateway accepts.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.render(w, r, http.StatusOK, "signin", h.signinPage(""))
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	// Every attempt counts, before the key is checked: a guess costs as
	// much as a sign-in.
	throttled := key
	if len(throttled) > maxKeyLen {
		throttled = ""
	}
	if wait, ok := h.sessions.admitSignIn(clientAddress(r), throttled); !ok {
		h.tooManySignIns(w, r, wait)
		return
	}
	if key == "" || len(key) > maxKeyLen {
		h.render(w, r, http.StatusUnauthorized, "signin", h.signinPage("enter a gateway key"))
		return
	}
	if _, ok := h.auth(key); !ok {
		// Say no more than the API would: not which part was wrong.
		h.render(w, r, http.StatusUnauthorized, "signin", h.signinPage("the gateway does not accept this key"))
		return
	}
	id, _, err := h.sessions.create(key, h.ttl())
	if errors.Is(err, errTooManySessions) {
		h.render(w, r, http.StatusServiceUnavailable, "signin", h.signinPage("too many console sessions; try again later"))
		return
	}
	http.SetCookie(w, h.cookie(r, id, int(h.ttl().Seconds())))
	h.redirect(w, r, "/")
}

// fail answers status with a page naming msg.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, c *ctx, status int, msg string) {
	p := &page{Title: http.StatusText(status), Err: msg}
	if c == nil {
		h.render(w, r, status, "error", p)
		return
	}
	h.renderFor(w, r, c, status, "error", p)
}

// renderFor renders a signed-in page.
func (h *Handler) renderFor(w http.ResponseWriter, r *http.Request, c *ctx, status int, name string, p *page) {
	p.CSRF = c.s.csrf
	if c.form != nil {
		p.Form = *c.form
		if !c.form.Inline && p.Err == "" {
			p.Err = c.form.Msg
		}
		if status == http.StatusOK {
			status = c.status
		}
	}
	if c.who != nil {
		p.Who = c.who.Name
	}
	h.render(w, r, status, name, p)
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	t := h.pages[name]
	p.P = prefix(r)
	if p.Nav == "" {
		p.Nav = name
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if err := t.ExecuteTemplate(w, "layout", p); err != nil {
		h.logger.Warn("rendering a console page", zap.String("page", name), zap.Error(err))
	}
}

// pageNames are the templates, each rendered inside layout.html.
var pageNames = []string{"signin", "signedin", "error", "overview", "keys", "logs", "playground", "budgets", "virtualkeys", "batches", "configs", "keyedit", "prompts"}

func parsePages() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(pageNames))
	for _, n := range pageNames {
		t, err := template.New(n).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, err
		}
		out[n] = t
	}
	return out, nil
}
