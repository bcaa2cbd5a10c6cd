package console

import (
	"net/http"
	"net/url"
	"strconv"
)

// The users page: the identity provider's users the gateway recorded
// (GET /v1/users), each with its requests, spend and last use over
// keyUsageSpan from one grouped ledger query for the page, and a link to
// its logs. Two API calls a view, however many users.

func init() { pageNames = append(pageNames, "users") }

// usersPageSize is how many users a page shows.
const usersPageSize = 50

// userRow is one user of the users page.
type userRow struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Type         string   `json:"type"`
	WorkspaceID  string   `json:"workspace_id"`
	Scopes       []string `json:"scopes"`
	Status       string   `json:"status"`
	StatusReason string   `json:"status_reason"`
	CreatedAt    string   `json:"created_at"`
	Use          *keyUse  `json:"-"`
}

type usersData struct {
	Users          []userRow
	Total          int
	Search, Status string
	Page           int
	Prev, Next     string
	UseErr         string
}

// usersPage lists the users within the signed-in key's reach.
func (h *Handler) usersPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &usersData{Search: filterValue(r, "search"), Status: filterValue(r, "status")}
	if len(d.Search) > maxKeySearch {
		d.Search = d.Search[:maxKeySearch]
	}
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = min(max(d.Page, 0), 10_000)
	q := url.Values{"page_size": {strconv.Itoa(usersPageSize)}, "current_page": {strconv.Itoa(d.Page)}}
	keep := url.Values{}
	for k, v := range map[string]string{"search": d.Search, "status": d.Status} {
		if v != "" {
			q.Set(k, v)
			keep.Set(k, v)
		}
	}
	var list struct {
		Total   int       `json:"total"`
		Data    []userRow `json:"data"`
		HasMore bool      `json:"has_more"`
	}
	p := &page{Title: "Users", Data: d}
	if err := h.getJSON(r, c.s.key, "/users", q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "users", p)
		return
	}
	d.Users, d.Total = list.Data, list.Total
	names := make([]string, len(d.Users))
	for i := range d.Users {
		names[i] = d.Users[i].Name
	}
	use, why := h.usageOf(r, c, names)
	for i := range d.Users {
		d.Users[i].Use = use[d.Users[i].Name]
	}
	d.UseErr = why
	link := func(pg int) string {
		v := url.Values{"page": {strconv.Itoa(pg)}}
		for k := range keep {
			v.Set(k, keep.Get(k))
		}
		return "?" + v.Encode()
	}
	if d.Page > 0 {
		d.Prev = link(d.Page - 1)
	}
	if list.HasMore {
		d.Next = link(d.Page + 1)
	}
	h.renderFor(w, r, c, http.StatusOK, "users", p)
}
