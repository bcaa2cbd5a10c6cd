package console

import (
	"net/http"
	"net/url"
	"slices"
)

// formState is a form the console refused or the API refused: the page
// that holds the form is rendered again with the message next to it and
// what was typed filled back in, rather than a dead-end error page.
// The zero value is "no refused form", so templates may ask it anything.
type formState struct {
	// Name is the form's name on its page ("create", "edit"...).
	Name string
	// Msg is why it was refused.
	Msg string
	// Inline says the page shows Msg beside the form; otherwise it is
	// the page's error (a form in a table row has no room of its own).
	Inline bool
	values url.Values
}

// On reports whether the refused form is name, so the page shows the
// message beside it.
func (f formState) On(name string) bool { return f.Inline && f.Name == name }

// Value is what was typed into field of form name, or def when that form
// was not the refused one. A field not sent at all (an unchecked box)
// reads as empty for the refused form.
func (f formState) Value(name, field, def string) string {
	if f.Name != name {
		return def
	}
	return f.values.Get(field)
}

// secretFields are the fields never sent back into a page: what they
// hold must be typed again (a provider key, a sign-in key).
var secretFields = []string{"key", "csrf"}

// keptValues is the submitted form without its secrets.
func keptValues(r *http.Request) url.Values {
	out := make(url.Values, len(r.PostForm))
	for k, v := range r.PostForm {
		if !slices.Contains(secretFields, k) {
			out[k] = v
		}
	}
	return out
}

// refill answers a refused form: show, the page back (a console path
// with its query, as a redirect after success would name it), rendered
// again as a GET, with status, msg beside the form name and the values
// typed.
func (h *Handler) refill(w http.ResponseWriter, r *http.Request, c *ctx, status int, msg, name, back string, show func(http.ResponseWriter, *http.Request, *ctx)) {
	u, err := url.Parse(back)
	if err != nil {
		h.fail(w, r, c, status, msg)
		return
	}
	// Only the query is the page's: the path stays the one the browser
	// posted to, from which the mount prefix of every link is found.
	r2 := r.Clone(r.Context())
	r2.Method = http.MethodGet
	r2.URL.RawQuery = u.RawQuery
	c2 := *c
	c2.form = &formState{Name: name, Msg: msg, Inline: name != "", values: keptValues(r)}
	c2.status = status
	show(w, r2, &c2)
}
